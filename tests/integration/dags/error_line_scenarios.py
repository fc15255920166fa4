"""A data engineer's first mistakes, each a task that fails: a query of a table that does not exist, a cached table
whose query fails, a PARTIAL lookup join of a PostgreSQL table that does not exist, a COMPILE PLAN whose STATE_TTL
hint is negative, and a PostgreSQL connection given as the Spark connection. Each task's error is one line, reason
first, naming the statement, cache or lookup table it came from; the last two fail before any Spark application."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.lookup.table import LookupTable
from spark_tables.operators.lookup import SparkLookupJoinOperator
from spark_tables.operators.plan import SparkCompilePlanOperator
from spark_tables.operators.sql import SparkSqlJobOperator

#: The PostgreSQL connection of the lookup table, also given (wrongly) as a Spark connection.
POSTGRES = "spark_tables_lookup_demo"
broken = CachedTable("broken_cache", query="SELECT * FROM no_such_table")
missing = LookupTable(
    name="missing_dimension",
    conn_id=POSTGRES,
    table="public.no_such_dimension",
    key=("id",),
    options={"lookup.cache": "PARTIAL", "lookup.partial-cache.max-rows": "100"},
)

with DAG(dag_id="error_lines", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC"), catchup=False):
    SparkSqlJobOperator(task_id="missing_table", sql=["SELECT 1", "SELECT * FROM no_such_table"])
    SparkSqlJobOperator(task_id="cache_fails", sql="SELECT count(*) FROM broken_cache", caches=[broken])
    SparkLookupJoinOperator(task_id="lookup_fails", lookup=missing, probe="SELECT id FROM range(10)", on="id")
    SparkCompilePlanOperator(
        task_id="negative_ttl",
        plan_uri=os.path.join(os.environ["AIRFLOW_HOME"], "plans", "error_lines.json"),
        sql="INSERT INTO t SELECT /*+ STATE_TTL('o' = '-1 h') */ o.shop, count(*) FROM orders o GROUP BY o.shop",
    )
    SparkSqlJobOperator(task_id="wrong_connection", sql="SELECT 1", conn_id=POSTGRES)
