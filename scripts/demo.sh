#!/usr/bin/env bash
# Sets everything up, then runs the example DAG of every capability that has landed, end to end on local
# Spark with the embedded catalog, and sums up per capability what ran, what it found and where to look.
# Without PostgreSQL (or its JDBC driver) it runs all but the lookup, plan and buffered output examples, and says
# so in one line. The buffered output example's Kafka topic is on a broker the demo starts (scripts/kafka_broker.py,
# from the jars setup.sh fetched) and stops at its end.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"  # the examples, whatever DAGs folder the shell names

DEMO_DAGS=(example_spark_sql example_spark_ctas example_spark_cache)
KAFKA_HOME="$AIRFLOW_HOME/demo-kafka"
stop_servers() {
  python scripts/connect_server.py stop
  [ ! -d "$KAFKA_HOME" ] || python scripts/kafka_broker.py stop "$KAFKA_HOME"
}
trap stop_servers EXIT
# The lookup example's dimension table, and the plan and buffered output examples' sinks, live in PostgreSQL:
# without it (or the JDBC driver) the demo runs the rest.
export AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO=${AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO:-postgres://postgres@127.0.0.1:5432/test}
eval "$(python - <<'PY'
import os
import shlex
from urllib.parse import unquote, urlsplit

uri = urlsplit(os.environ["AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO"])
for name, value in {
    "PG_HOST": uri.hostname or "127.0.0.1",
    "PG_PORT": uri.port or 5432,
    "PG_USER": unquote(uri.username or "postgres"),
    "PG_PASSWORD": unquote(uri.password or ""),
    "PG_DATABASE": unquote(uri.path[1:]) or "postgres",
}.items():
    print(f"{name}={shlex.quote(str(value))}")
PY
)"
if postgres_ready AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO \
  "$PG_HOST" "$PG_PORT" "$PG_USER" "$PG_PASSWORD" "$PG_DATABASE"; then
  DEMO_DAGS+=(example_spark_lookup example_spark_plan example_spark_buffered_output)
  export AIRFLOW_CONN_SPARK_TABLES_PLAN_DEMO=${AIRFLOW_CONN_SPARK_TABLES_PLAN_DEMO:-$AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO}
  export AIRFLOW_CONN_SPARK_TABLES_BUFFERED_DEMO=${AIRFLOW_CONN_SPARK_TABLES_BUFFERED_DEMO:-$AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO}
  if [ -z "${AIRFLOW_CONN_SPARK_TABLES_BUFFERED_KAFKA:-}" ]; then
    echo "starting a Kafka broker for the buffered output example's topic ..."
    python scripts/kafka_broker.py stop "$KAFKA_HOME"  # a broker an earlier demo left, with its topic
    KAFKA_BROKER=$(python scripts/kafka_broker.py start "$KAFKA_HOME" "$KAFKA_BROKER_JARS")
    export AIRFLOW_CONN_SPARK_TABLES_BUFFERED_KAFKA="{\"conn_type\": \"kafka\", \"extra\": {\"bootstrap.servers\": \"$KAFKA_BROKER\"}}"
  fi
else
  LOOKUP_LEFT_OUT="$POSTGRES_PROBLEM; then rerun bash scripts/demo.sh to include it"
  echo "note: leaving out example_spark_lookup, example_spark_plan and example_spark_buffered_output (they need" \
    "PostgreSQL): $LOOKUP_LEFT_OUT"
fi
# On a fresh snapshot folder the lookup example's full cache is due for its reload at once.
rm -rf "$AIRFLOW_HOME"/spark_tables/lookup/demo_customers*
LOGICAL_DATE=${LOGICAL_DATE:-$(date -u +%F)}
# The CTAS example replaces its Delta table each day: run for the day before too, so its history has both days.
DAY_BEFORE=$(date -u -d "$LOGICAL_DATE - 1 day" +%F)
for dag_id in "${DEMO_DAGS[@]}"; do
  days=("$LOGICAL_DATE")
  [ "$dag_id" != example_spark_ctas ] || days=("$DAY_BEFORE" "$LOGICAL_DATE")
  for day in "${days[@]}"; do
    echo "running $dag_id for $day (the jobs' own log lines follow) ..."
    airflow dags test "$dag_id" "$day" > "$AIRFLOW_HOME/demo-$dag_id.log" 2>&1 || {
      tail -n 40 "$AIRFLOW_HOME/demo-$dag_id.log" >&2
      echo "error: $dag_id failed; whole log: $AIRFLOW_HOME/demo-$dag_id.log" >&2
      exit 1
    }
    grep -E "spark_tables INFO|job output|done:|registered the copy|released the caches|metrics:|is due|record\(s\) in,|nothing to load" "$AIRFLOW_HOME/demo-$dag_id.log" \
      | sed -E 's/^[^ ]+ \[[a-z ]+\] //; s/ \[(airflow\.task|spark_tables\.hooks|spark_tables\.operators).*$//'
  done
done

# The cache example once more, in session mode: on a Spark Connect server of the venv's pyspark, on the embedded
# catalog (free now that the per-job examples have ended), with b kept in the server's memory.
echo "running example_spark_cache in session mode, on a Spark Connect server started for the demo ..."
CONNECT_LOG="$AIRFLOW_HOME/demo-connect-server.log"
SESSION_CONNECTION=$(python scripts/connect_server.py start --log "$CONNECT_LOG")
AIRFLOW_CONN_SPARK_DEFAULT="$SESSION_CONNECTION" airflow dags test example_spark_cache \
  > "$AIRFLOW_HOME/demo-example_spark_cache-session.log" 2>&1 || {
  tail -n 40 "$AIRFLOW_HOME/demo-example_spark_cache-session.log" >&2
  echo "error: example_spark_cache failed in session mode; whole log:" \
    "$AIRFLOW_HOME/demo-example_spark_cache-session.log (the server's: $CONNECT_LOG)" >&2
  exit 1
}
grep -E "spark_tables INFO|job output|done:|registered the copy|released the c" \
  "$AIRFLOW_HOME/demo-example_spark_cache-session.log" \
  | sed -E 's/^[^ ]+ \[[a-z ]+\] //; s/ \[(airflow\.task|spark_tables\.hooks|spark_tables\.operators).*$//'
python scripts/connect_server.py stop

python scripts/demo_summary.py "$LOGICAL_DATE" "${LOOKUP_LEFT_OUT:-}" "database $PG_DATABASE at $PG_HOST:$PG_PORT" \
  "$DAY_BEFORE $LOGICAL_DATE"
