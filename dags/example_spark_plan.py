"""FLIP-292 compiled plans: a streaming pipeline compiled once into a JSON plan, explained, and executed run after
run, with the state TTL of each operator (and of each side of a join) set on its own.

Two results from one stream of orders, compiled as one statement set into one plan file:

- ``shop_counts`` (FLIP-292's Example 1): orders deduplicated by id, then counted and totalled per shop. The
  deduplication only needs to remember an order id for as long as duplicates arrive (1 h, set by editing the
  plan, as FLIP-292 intends: ``shorten_deduplication``); the count must live as long as the shop sells (7 d, the
  job's ``table.exec.state.ttl``).
- ``order_customers`` (Example 2): each order with its customer, a regular left join of two streams. The hint keeps
  orders 1 h (they arrive once) and customers 7 d (they are joined again and again).

``shop_counts`` goes into a PostgreSQL table that serves the counts, ``order_customers`` into a Delta Lake table of the
catalog (the catalog loads Delta), both upserted by key: PostgreSQL's with ``INSERT ... ON CONFLICT`` (connection
``spark_tables_plan_demo``, type postgres), Delta's with one ``MERGE`` a micro-batch (``TableUpsertSink``). ``compile``
writes the plan only when there is none (IF NOT EXISTS), so edits a person made to its TTLs survive; ``explain``
shows the node graph with each TTL (XCom ``explain``, also in its log) and warns where a downstream operator would
forget sooner than an upstream one; ``execute`` processes what the source tables hold since the last run, resuming
from the plan's checkpoint. Every run of the DAG adds orders (some of them duplicates of earlier ones).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pendulum
from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator
from airflow.sdk import DAG, ObjectStoragePath, task

from spark_tables.core.streaming.sinks import PostgresUpsertSink, TableUpsertSink
from spark_tables.operators.plan import SparkCompilePlanOperator, SparkExecutePlanOperator, SparkExplainPlanOperator
from spark_tables.operators.sql import SparkSqlJobOperator

CONN_ID = "spark_tables_plan_demo"
#: The plan file: a path, a file:// URI or object storage (s3://...).
PLAN_URI = os.environ.get(
    "SPARK_TABLES_PLAN_DEMO_URI",
    str(Path(os.environ.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "plans" / "example_spark_plan.json"),
)
SINKS = [PostgresUpsertSink(name="shop_counts", conn_id=CONN_ID, table="spark_tables_demo.shop_counts", key=("shop",))]
#: The Delta table of the catalog that Example 2's results are merged into, by order.
ORDER_CUSTOMERS_TABLE = TableUpsertSink(name="plan_demo.order_customers", key=("order_id",))
SEED_SINKS = [
    # The examples share this schema: run at once (as from the UI), their seeds take turns, one transaction each,
    # since two CREATE ... IF NOT EXISTS of one name at once can fail on a duplicate key.
    "SELECT pg_advisory_xact_lock(hashtext('spark_tables_demo'))",
    "CREATE SCHEMA IF NOT EXISTS spark_tables_demo",
    "CREATE TABLE IF NOT EXISTS spark_tables_demo.shop_counts (shop text PRIMARY KEY, orders bigint, total bigint)",
]
#: Streaming sources are catalog tables: each INSERT adds files to their folders, which the next execution reads.
#: The 30 customers once, by the first run; 200 orders a run, of 180 ids: the last 20 of a run are duplicates of its
#: first 20, sent again. A run's ids come
#: from its time: its logical date, or when it was triggered if it has none (a run from the UI or the REST API).
ADD_ORDERS = [
    "CREATE DATABASE IF NOT EXISTS plan_demo",
    "CREATE TABLE IF NOT EXISTS plan_demo.orders (order_id INT, shop STRING, customer_id INT, amount INT) USING json",
    "CREATE TABLE IF NOT EXISTS plan_demo.customers (customer_id INT, name STRING, tier STRING) USING json",
    "CREATE TABLE IF NOT EXISTS plan_demo.order_customers "
    "(order_id INT, shop STRING, customer_id INT, name STRING, tier STRING) USING delta",
    """INSERT INTO plan_demo.orders
       SELECT CAST({{ (dag_run.logical_date or dag_run.run_after).timestamp() | int % 100000 }} * 1000
                   + id % 180 AS INT),
              concat('shop_', CAST(id % 5 AS STRING)), CAST(id % 180 % 40 AS INT), CAST(id % 180 % 97 AS INT)
       FROM range(200)""",
    """INSERT INTO plan_demo.customers
       SELECT CAST(id AS INT), concat('customer ', CAST(id AS STRING)), IF(id % 4 = 0, 'gold', 'silver')
       FROM range(30) WHERE NOT EXISTS (SELECT 1 FROM plan_demo.customers)""",
]
SHOP_COUNTS = """
    INSERT INTO shop_counts
    SELECT shop, COUNT(*) AS orders, SUM(amount) AS total
    FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn FROM plan_demo.orders)
    WHERE rn = 1
    GROUP BY shop
"""
ORDER_CUSTOMERS = """
    INSERT INTO plan_demo.order_customers
    SELECT /*+ STATE_TTL('o' = '1 h', 'c' = '7 d') */ o.order_id, o.shop, o.customer_id, c.name, c.tier
    FROM plan_demo.orders o LEFT JOIN plan_demo.customers c ON o.customer_id = c.customer_id
"""

with DAG(
    dag_id="example_spark_plan",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "flip-292"],
) as dag:
    seed_sinks = SQLExecuteQueryOperator(task_id="seed_sinks", conn_id=CONN_ID, sql=SEED_SINKS)
    add_orders = SparkSqlJobOperator(task_id="add_orders", sql=ADD_ORDERS)
    plan = {
        "plan_uri": PLAN_URI,
        "configuration": {"table.exec.state.ttl": "7 d"},
        "postgres_sinks": SINKS,
        "catalog_sinks": [ORDER_CUSTOMERS_TABLE],
    }
    compile_plan = SparkCompilePlanOperator(
        task_id="compile",
        sql=[SHOP_COUNTS, ORDER_CUSTOMERS],
        if_not_exists=True,
        **plan,
    )

    @task
    def shorten_deduplication(plan_uri: str = PLAN_URI) -> str:
        """The edit a person makes to the plan file: the deduplication's state kept 1 h instead of 7 d."""
        path = ObjectStoragePath(plan_uri)
        document = json.loads(path.read_text())
        for node in document["nodes"]:
            if node["type"] == "stream-exec-deduplicate":
                node["state"][0]["ttl"] = "1 h"
        path.write_text(json.dumps(document, indent=2) + "\n")
        return "deduplicateState: 1 h"

    explain = SparkExplainPlanOperator(task_id="explain", **plan)
    execute = SparkExecutePlanOperator(task_id="execute", **plan)
    [seed_sinks, add_orders] >> compile_plan >> shorten_deduplication() >> explain >> execute
