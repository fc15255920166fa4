"""CREATE TABLE AS SELECT with FLIP-218's lifecycle: a Hive-format parquet table, and a Delta Lake table replaced
day after day.

- ``snapshot_orders`` (parquet, level ``table``, the FLIP's): creates the day's snapshot table before its job fills
  it; if the job fails or the task is stopped, the table is dropped with its files. ``IF NOT EXISTS`` makes a
  rerun of a finished day succeed without running the job.
- ``publish_customer_totals`` (Delta Lake, a REPLACE): Delta's own atomic REPLACE TABLE AS SELECT, one commit;
  readers of ``customer_totals`` see the old version until then, and it stays in the table's history after
  (``SELECT ... VERSION AS OF n``): each day's totals are a version of their own. XCom has the version it committed,
  and the rows, bytes and files from the commit's metrics.

Runs on the embedded catalog (local[*] Spark, Derby metastore under AIRFLOW_HOME/spark_tables) loading Delta Lake, as
the repository's scripts set it up (its connection's extra ``"table-formats": ["delta"]``).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.operators.ctas import SparkCtasOperator

with DAG(
    dag_id="example_spark_ctas",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "example"],
) as dag:
    snapshot_orders = SparkCtasOperator(
        task_id="snapshot_orders",
        sql="""
            CREATE TABLE IF NOT EXISTS order_snapshot_{{ ds_nodash }}
            USING parquet
            PARTITIONED BY (region)
            TBLPROPERTIES ('source' = 'example_spark_ctas', 'ds' = '{{ ds }}')
            AS SELECT id AS order_id,
                      concat('customer_', CAST(id % 7 AS STRING)) AS customer,
                      CAST((id * 37) % 1000 / 10.0 AS DECIMAL(10, 2)) AS amount,
                      element_at(array('north', 'south', 'east'), CAST(id % 3 + 1 AS INT)) AS region
               FROM range(100000)
        """,
    )

    publish_customer_totals = SparkCtasOperator(
        task_id="publish_customer_totals",
        table="customer_totals",
        query="""
            SELECT customer, count(*) AS orders, sum(amount) AS total, '{{ ds }}' AS as_of
            FROM order_snapshot_{{ ds_nodash }} GROUP BY customer
        """,
        format="delta",
        replace=True,  # one Delta commit: the old version stays readable until then, and in the history after
    )

    snapshot_orders >> publish_customer_totals
