#!/usr/bin/env bash
# Sets everything up, then runs the example DAG of every capability that has landed, end to end on local
# Spark with the embedded catalog, and says where to look at what they did.
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

DEMO_DAGS=(example_spark_sql example_spark_ctas example_spark_cache example_spark_lookup)
# The lookup example's dimension table lives in PostgreSQL; its full cache is reloaded at once on a fresh snapshot folder.
export AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO=${AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO:-postgres://postgres@127.0.0.1:5432/test}
rm -rf "$AIRFLOW_HOME/spark_tables/lookup/demo_customers"
LOGICAL_DATE=${LOGICAL_DATE:-$(date -u +%F)}
for dag_id in "${DEMO_DAGS[@]}"; do
  echo "running $dag_id for $LOGICAL_DATE (the jobs' own log lines follow) ..."
  airflow dags test "$dag_id" "$LOGICAL_DATE" > "$AIRFLOW_HOME/demo-$dag_id.log" 2>&1 || {
    tail -n 40 "$AIRFLOW_HOME/demo-$dag_id.log" >&2
    echo "error: $dag_id failed; whole log: $AIRFLOW_HOME/demo-$dag_id.log" >&2
    exit 1
  }
  grep -E "spark_tables INFO|job output|done:|registered the copy|released the caches|metrics:|is due" "$AIRFLOW_HOME/demo-$dag_id.log" \
    | sed -E 's/^[^ ]+ \[[a-z ]+\] //; s/ \[(airflow\.task|spark_tables\.hooks|spark_tables\.operators).*$//'
done

WAREHOUSE="$AIRFLOW_HOME/spark_tables/warehouse"
python - "$WAREHOUSE" "$LOGICAL_DATE" "$AIRFLOW_HOME/airflow.db" <<'PY'
import json
import sqlite3
import sys
import pandas as pd
warehouse, ds, airflow_db = sys.argv[1], sys.argv[2], sys.argv[3]
totals = pd.read_parquet(f"{warehouse}/demo.db/daily_totals/ds={ds}").sort_values("customer")
print(f"\ndemo.daily_totals for {ds}, read straight from the warehouse's parquet files:")
print(totals.to_string(index=False))
published = pd.read_parquet(f"{warehouse}/customer_totals").sort_values("customer")
print("\ncustomer_totals, created by CTAS through a staging table (example_spark_ctas):")
print(published.to_string(index=False))
with sqlite3.connect(airflow_db) as db:
    [run_id] = db.execute("SELECT run_id FROM dag_run WHERE dag_id = 'example_spark_cache' ORDER BY id DESC").fetchone()
    xcoms = dict(db.execute(
        "SELECT task_id, value FROM xcom WHERE dag_id = 'example_spark_cache' AND run_id = ? AND key = 'return_value'",
        (run_id,),
    ).fetchall())
print("\nexample_spark_cache: cached table b in each task (its XCom 'caches'), Spark work inside the application:")
for task in ("max_b", "min_b", "normalise_b", "count_b"):
    value = json.loads(xcoms[task])
    b = value["caches"]["b"]
    print(f"  {task:12} {b['status']:8} work {value['work_seconds']:5.1f} s  read {b['bytes_read']:>10,} B  "
          f"written {b['bytes_written']:>10,} B")
print(f"  release_caches: usage {json.loads(xcoms['release_caches'])['usage']}")
PY
cat <<MSG

Where to look:
  tables (parquet, partitioned by ds): $WAREHOUSE/demo.db/
  CTAS tables (example_spark_ctas):     $WAREHOUSE/order_snapshot_<ds>/ and $WAREHOUSE/customer_totals/
                                        their ownership marks: the spark_tables.ctas.* table properties
  cached table b (example_spark_cache): each task's XCom "caches" (miss, then hits) and release_caches' "usage";
                                        its copy lived under $AIRFLOW_HOME/spark_tables/cache/ until the run's end
  lookup joins (example_spark_lookup):  each enrich_* task's XCom "metrics" (the FLIP-221 metrics) and its table
                                        $WAREHOUSE/orders_enriched_{none,partial,full}/ (the same rows three ways);
                                        the full-cache snapshots: $AIRFLOW_HOME/spark_tables/lookup/demo_customers/
  embedded Derby metastore:             $AIRFLOW_HOME/spark_tables/metastore_db
  whole run log with the Spark driver:  $AIRFLOW_HOME/demo-*.log
  task logs:                            $AIRFLOW_HOME/logs/dag_id=example_spark_sql/, .../dag_id=example_spark_ctas/, .../dag_id=example_spark_cache/, .../dag_id=example_spark_lookup/
  the Airflow UI (runs, logs, XCom):    source scripts/setup.sh && airflow standalone   # then http://localhost:8080
MSG
