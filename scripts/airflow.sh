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
# which every component handles; what is still running STANDALONE_STOP_SECONDS (30) later is named and killed. The
# script returns when the last of them has exited (0 when it was asked to stop).
STOP_SECONDS=${STANDALONE_STOP_SECONDS:-30}
set +e
setsid airflow "$@" &
STANDALONE=$!
KILL_AT=""
KILLED=""
trap '[ -n "$KILL_AT" ] || KILL_AT=$((SECONDS + STOP_SECONDS)); kill -TERM -- "-$STANDALONE" 2> /dev/null' INT TERM HUP
# polled rather than waited for: the rest of the group is no child of ours
while kill -0 "$STANDALONE" 2> /dev/null || kill -0 -- "-$STANDALONE" 2> /dev/null; do
  if [ -n "$KILL_AT" ] && [ -z "$KILLED" ] && [ "$SECONDS" -ge "$KILL_AT" ]; then
    echo "standalone | still running ${STOP_SECONDS}s after the stop, killed:" \
      "$(python "$ROOT/scripts/standalone_left.py" "$STANDALONE")" >&2
    kill -KILL -- "-$STANDALONE" 2> /dev/null
    KILLED=yes
  fi
  sleep 0.2
done
wait "$STANDALONE"
status=$?
[ -z "$KILL_AT" ] || status=0
exit "$status"
