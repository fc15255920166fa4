"""CREATE TABLE AS SELECT with FLIP-218's lifecycle, at both atomicity levels.

- ``snapshot_orders`` (level ``table``, the FLIP's): creates the day's snapshot table before its job fills it;
  if the job fails or the task is stopped, the table is dropped with its files. ``IF NOT EXISTS`` makes a
  rerun of a finished day succeed without running the job.
- ``publish_customer_totals`` (level ``staging``, a REPLACE): builds the new totals in a staging table and
  swaps it in only when complete; readers of ``customer_totals`` see the old table until then.

Runs on the embedded default (local[*] Spark, Derby metastore under AIRFLOW_HOME/spark_tables).
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
        replace=True,  # atomicity "staging": the old table stays readable until the new one is complete
    )

    snapshot_orders >> publish_customer_totals
