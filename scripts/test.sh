#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: unit (seconds), spark (one local session) and
# integration (spark-submit, Airflow, PostgreSQL on 127.0.0.1:5432 unless SPARK_TABLES_TEST_PG_HOST/_PORT/_USER
# say otherwise, a Kafka broker it starts unless SPARK_TABLES_TEST_KAFKA names one, an S3 server likewise unless
# SPARK_TABLES_TEST_S3 names one), on two pytest-xdist workers, a test file a worker at a time (its tests share its fixtures).
# Extra arguments go to pytest: -n 0 runs in one process; paths choose what runs (scripts/test.sh tests/unit).
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"  # the examples, whatever DAGs folder the shell names
unset AIRFLOW_CONN_SPARK_TABLES_DEFAULT  # the tests make catalogs of their own, the setup's among them

# The tests' PostgreSQL, as tests/integration/conftest.py reads it: the metastore tests create their own
# database (spark_tables_test_gw0, _gw1, one per worker); the lookup tests need spark_tables_test.
PG_HOST=${SPARK_TABLES_TEST_PG_HOST:-127.0.0.1}
PG_PORT=${SPARK_TABLES_TEST_PG_PORT:-5432}
PG_USER=${SPARK_TABLES_TEST_PG_USER:-postgres}
postgres_ready SPARK_TABLES_TEST_PG_HOST/_PORT/_USER "$PG_HOST" "$PG_PORT" "$PG_USER" "" spark_tables_test || {
  echo "error: $POSTGRES_PROBLEM" >&2
  exit 1
}

# The Celery executor's broker in the tests of Airflow as deployed (tests/integration/airflow_services.py).
redis_ready SPARK_TABLES_TEST_REDIS "${SPARK_TABLES_TEST_REDIS:-127.0.0.1:6379}" || {
  echo "error: $REDIS_PROBLEM" >&2
  exit 1
}

source "$(dirname "${BASH_SOURCE[0]}")/debian_tools.sh"
# The monitoring pages' browser: Debian's chromium (Playwright drives it; its own browser downloads are not used).
export SPARK_TABLES_TEST_CHROMIUM=${SPARK_TABLES_TEST_CHROMIUM:-/usr/bin/chromium}
debian_tool_ready "$SPARK_TABLES_TEST_CHROMIUM" chromium "the monitoring pages' browser tests use it" \
  SPARK_TABLES_TEST_CHROMIUM || exit 1
# docker/compose.yaml is validated with Debian's docker-compose (its `config` needs no Docker daemon).
export SPARK_TABLES_TEST_DOCKER_COMPOSE=${SPARK_TABLES_TEST_DOCKER_COMPOSE:-/usr/bin/docker-compose}
debian_tool_ready "$SPARK_TABLES_TEST_DOCKER_COMPOSE" docker-compose "the test of docker/compose.yaml validates it with it" \
  SPARK_TABLES_TEST_DOCKER_COMPOSE || exit 1

ruff check .
ruff format --check .

# The tests' Kafka broker (tests/kafka.py): a real one on loopback from the jars setup.sh fetched, started once for
# the whole run and stopped, its data removed, when the run ends.
# The tests' S3-compatible server (tests/s3.py): moto's, on loopback, likewise once for the run.
KAFKA_HOME="" S3_HOME=""
stop_servers() {
  if [ -n "$KAFKA_HOME" ]; then python scripts/kafka_broker.py stop "$KAFKA_HOME"; fi
  if [ -n "$S3_HOME" ]; then python scripts/s3_server.py stop "$S3_HOME"; fi
}
trap stop_servers EXIT
if [ -z "${SPARK_TABLES_TEST_KAFKA:-}" ]; then
  KAFKA_HOME=$(mktemp -d "${TMPDIR:-/tmp}/spark-tables-kafka.XXXXXX")
  SPARK_TABLES_TEST_KAFKA=$(python scripts/kafka_broker.py start "$KAFKA_HOME" "$KAFKA_BROKER_JARS")
  export SPARK_TABLES_TEST_KAFKA
fi
if [ -z "${SPARK_TABLES_TEST_S3:-}" ]; then
  S3_HOME=$(mktemp -d "${TMPDIR:-/tmp}/spark-tables-s3.XXXXXX")
  SPARK_TABLES_TEST_S3=$(python scripts/s3_server.py start "$S3_HOME")
  export SPARK_TABLES_TEST_S3
fi
targets=(tests)  # the whole suite, unless a path among the arguments says what to run
for arg in "$@"; do
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then targets=(); break; fi
done
python -m pytest "${targets[@]}" -n 2 --dist loadfile --durations=30 "$@"
