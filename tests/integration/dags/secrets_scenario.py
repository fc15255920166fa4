"""One Spark application whose every database is behind a password (``tests/integration/test_secrets.py``).

A lookup join (PARTIAL: the driver reads the table's schema with Spark's JDBC reader, the executors' Python workers
query it with psycopg) writes its output to a table of the PostgreSQL metastore (the Hive client). The catalog and
lookup connections carry passwords; Spark's event log goes to ``<AIRFLOW_HOME>/spark-events``, which the test reads
for what Spark shows of the job's settings.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from spark_tables.core.lookup.table import LookupTable
from spark_tables.operators.lookup import SparkLookupJoinOperator

customers = LookupTable(
    name="guarded_customers",
    conn_id="spark_tables_guarded_lookup",
    table="guarded_demo.customers",
    key=("customer_id",),
    options={"lookup.cache": "PARTIAL", "lookup.partial-cache.max-rows": "100"},
)

with DAG(
    dag_id="guarded_connections",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    SparkLookupJoinOperator(
        task_id="enrich",
        lookup=customers,
        probe="SELECT id AS order_id, CAST(1 + id % 40 AS INT) AS customer_id FROM range(200)",
        on="customer_id",
        output_table="guarded_orders_enriched",
        mode="overwrite",
        conf={
            "spark.eventLog.enabled": "true",
            "spark.eventLog.compress": "false",  # one plain JSON-lines file, for the test to read
            "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.dir": "file://" + os.path.join(os.environ.get("AIRFLOW_HOME", "/tmp"), "spark-events"),
        },
    )
