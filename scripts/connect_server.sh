#!/usr/bin/env bash
# Starts or stops a Spark Connect server for session mode in this repository's setup (scripts/setup.sh: .venv,
# .airflow/ as AIRFLOW_HOME), on the embedded default's catalog or a spark_tables connection's:
#
#   export AIRFLOW_CONN_SPARK_DEFAULT=$(bash scripts/connect_server.sh start)
#   bash scripts/connect_server.sh start --catalog spark_tables_default
#   bash scripts/connect_server.sh stop
#
# The details: scripts/connect_server.py, docs/session-mode.md.
CALLER_DIR=$PWD
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh" >&2  # stdout is the connection, alone
cd "$CALLER_DIR"  # paths among the arguments are the caller's
exec python "$ROOT/scripts/connect_server.py" "$@"
