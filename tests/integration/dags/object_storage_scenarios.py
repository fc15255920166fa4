"""The DAG of every store on S3 (tests/integration/test_object_storage.py): the test sets the warehouse (or the
scenario database's location), the cache, lookup, checkpoint and exchange roots to one bucket of the tests' S3
server, and runs it twice. Each run adds 100 orders to a Delta table; ``snapshot`` copies them by CTAS, two tasks
read one cached table (a copy under the cache root), a lookup table's full cache is loaded into a snapshot under
the lookup root and joined, and a streaming aggregation counts each customer's orders into a table, from its
checkpoint under the checkpoint root: the second run reads only the orders the first did not."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.streaming.sinks import TableUpsertSink
from spark_tables.operators.aggregation import SparkStreamingAggregationOperator
from spark_tables.operators.ctas import SparkCtasOperator
from spark_tables.operators.lookup import SparkLookupJoinOperator, SparkLookupReloadOperator
from spark_tables.operators.sql import SparkSqlJobOperator

#: The scenario database's location: empty where the catalog's warehouse is on S3 already.
LOCATION = os.environ.get("SPARK_TABLES_TEST_S3_DATABASE", "")
ADD_ORDERS = [
    "CREATE DATABASE IF NOT EXISTS s3_scenario" + (f" LOCATION '{LOCATION}'" if LOCATION else ""),
    "CREATE TABLE IF NOT EXISTS s3_scenario.orders (order_id BIGINT, customer_id INT, amount DOUBLE) USING delta",
    "CREATE TABLE IF NOT EXISTS s3_scenario.customer_orders (customer_id INT, orders BIGINT) USING delta",
    """INSERT INTO s3_scenario.orders
       SELECT id + seen, CAST(1 + id % 5 AS INT), CAST(id AS DOUBLE)
       FROM range(100) CROSS JOIN (SELECT count(*) AS seen FROM s3_scenario.orders)""",
]
#: On files in both modes (not a Connect server's memory): a copy under the cache root.
TOTALS = CachedTable(
    "totals",
    query="SELECT customer_id, sum(amount) AS total FROM s3_scenario.orders GROUP BY customer_id",
    storage="files",
)
CUSTOMERS = LookupTable(
    name="s3_scenario_customers",
    conn_id="spark_tables_lookup_demo",
    table="s3_scenario.customers",
    key=("customer_id",),
    options={"lookup.cache": "FULL", "lookup.full-cache.periodic-reload.interval": "1 h"},
)

with DAG(
    dag_id="s3_stores",
    schedule=None,
    start_date=pendulum.datetime(2026, 12, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 0},
):
    add_orders = SparkSqlJobOperator(task_id="add_orders", sql=ADD_ORDERS)
    snapshot = SparkCtasOperator(
        task_id="snapshot",
        table="s3_scenario.order_snapshot",
        query="SELECT * FROM s3_scenario.orders",
        format="delta",
        replace=True,
    )
    largest = SparkSqlJobOperator(task_id="largest", sql="SELECT max(total) AS largest FROM totals", caches=[TOTALS])
    smallest = SparkSqlJobOperator(task_id="smallest", sql="SELECT min(total) AS smallest FROM totals", caches=[TOTALS])
    reload = SparkLookupReloadOperator(task_id="reload", lookup=CUSTOMERS)
    enrich = SparkLookupJoinOperator(
        task_id="enrich",
        lookup=CUSTOMERS,
        probe="SELECT order_id, customer_id, amount FROM s3_scenario.orders",
        on="customer_id",
        output_table="s3_scenario.orders_enriched",
        mode="overwrite",
    )
    count = SparkStreamingAggregationOperator(
        task_id="count",
        sql="SELECT customer_id, count(*) AS orders FROM STREAM(s3_scenario.orders) GROUP BY customer_id",
        sink=TableUpsertSink("s3_scenario.customer_orders", key=("customer_id",)),
    )
    add_orders >> [snapshot, largest, reload, count]
    largest >> smallest
    reload >> enrich
