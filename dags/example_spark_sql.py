"""Spark SQL jobs on the provider's catalog: load a day of orders, then summarise it.

Runs on the embedded default (local[*] Spark, Derby metastore under AIRFLOW_HOME/spark_tables). Both tasks
are idempotent for their day: a rerun overwrites that day's partition and nothing else.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.operators.sql import SparkSqlJobOperator

with DAG(
    dag_id="example_spark_sql",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "example"],
) as dag:
    load_orders = SparkSqlJobOperator(
        task_id="load_orders",
        sql=[
            "CREATE DATABASE IF NOT EXISTS demo",
            """CREATE TABLE IF NOT EXISTS demo.orders
                 (order_id BIGINT, customer STRING, amount DECIMAL(10, 2), ds STRING)
               USING parquet PARTITIONED BY (ds)""",
            """INSERT OVERWRITE demo.orders PARTITION (ds = '{{ ds }}')
               SELECT id AS order_id,
                      concat('customer_', CAST(id % 7 AS STRING)) AS customer,
                      CAST((id * 37) % 1000 / 10.0 AS DECIMAL(10, 2)) AS amount
               FROM range(10000)""",
        ],
    )

    summarise = SparkSqlJobOperator(
        task_id="summarise",
        sql="""
            CREATE TABLE IF NOT EXISTS demo.daily_totals
              (customer STRING, orders BIGINT, total DECIMAL(20, 2), ds STRING)
            USING parquet PARTITIONED BY (ds);
            INSERT OVERWRITE demo.daily_totals PARTITION (ds = '{{ ds }}')
            SELECT customer, count(*) AS orders, sum(amount) AS total
            FROM demo.orders WHERE ds = '{{ ds }}' GROUP BY customer;
            SELECT customer, orders, total FROM demo.daily_totals WHERE ds = '{{ ds }}' ORDER BY customer
        """,
    )

    load_orders >> summarise
