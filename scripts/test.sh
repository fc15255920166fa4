#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: unit (seconds), spark (one local session) and
# integration (spark-submit, Airflow, PostgreSQL on 127.0.0.1:5432 unless SPARK_TABLES_TEST_PG says otherwise),
# on two pytest-xdist workers, a test file a worker at a time (its tests share its fixtures). Extra arguments go to
# pytest: -n 0 runs in one process.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
ruff check .
ruff format --check .
python -m pytest tests -n 2 --dist loadfile "$@"
