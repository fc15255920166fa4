#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: unit (seconds), spark (one local session) and
# integration (spark-submit, Airflow, PostgreSQL on 127.0.0.1:5432 unless SPARK_TABLES_TEST_PG says otherwise).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ruff check .
ruff format --check .
python -m pytest tests "$@"
