"""The DAG the Spark cluster's integration tests run for what fails before a job's work: three independent tasks,
each refused for another reason (a cache root its executors do not share, a master that cannot be reached, cluster
deploy mode on the standalone master), their connections and settings given by the test."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.core.cache.table import CachedTable
from spark_tables.operators.sql import SparkSqlJobOperator

SMALL = CachedTable("small", query="SELECT id AS k FROM range(10)")

with DAG(
    dag_id="cluster_refusals",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    default_args={"retries": 0},
):
    SparkSqlJobOperator(task_id="unshared_cache_root", sql="SELECT count(*) FROM small", caches=[SMALL])
    SparkSqlJobOperator(task_id="unreachable_master", sql="SELECT 1", conn_id="spark_unreachable")
    SparkSqlJobOperator(task_id="cluster_deploy_mode", sql="SELECT 1", conn_id="spark_cluster_mode")
