#!/usr/bin/env bash
# Runs an airflow command in this repository's setup (scripts/setup.sh: .venv, .airflow/ as AIRFLOW_HOME, the XCom
# backend of cached tables), on the DAGs folder AIRFLOW__CORE__DAGS_FOLDER names, or else this repository's dags/:
#
#   bash scripts/airflow.sh standalone
#   AIRFLOW__CORE__DAGS_FOLDER=~/my_dags bash scripts/airflow.sh dags test my_dag
#
# A script rather than `source scripts/setup.sh`, which would leave the calling shell with `set -euo pipefail`.
CALLER_DIR=$PWD
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$CALLER_DIR"  # paths among the arguments are the caller's

if [ "${1:-}" != standalone ]; then
  exec airflow "$@"
fi
# Ctrl-C reaches every process in the terminal's foreground group: with `airflow standalone` the scheduler's
# LocalExecutor workers too, and the scheduler's shutdown then waits for them for ever. So standalone runs in a
# process group of its own, and Ctrl-C (or a SIGTERM or SIGHUP to this script) ends that group with one SIGTERM,
# which every component handles; the script returns when the last of them has exited (0 when it was asked to stop).
set +e
setsid airflow "$@" &
STANDALONE=$!
STOPPED=""
trap 'STOPPED=yes; kill -TERM -- "-$STANDALONE" 2> /dev/null' INT TERM HUP
status=0
while kill -0 "$STANDALONE" 2> /dev/null; do
  wait "$STANDALONE"
  status=$?
done
while kill -0 -- "-$STANDALONE" 2> /dev/null; do sleep 0.2; done  # the rest of its group, which is no child of ours
[ -z "$STOPPED" ] || status=0
exit "$status"
