"""A cached table b written by ``writer`` and read by ``reader``, for the test of a registry XCom forged through
Airflow's REST API (``test_forged_xcom.py``): ``airflow dags test`` runs the DAG once (the reader hits the writer's
copy, the release removes both), then the test forges a registry entry on ``writer`` and runs ``reader``, the release
and ``writer`` again."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.core.cache.table import CachedTable
from spark_tables.operators.cache import release_caches
from spark_tables.operators.sql import SparkSqlJobOperator

#: On files in either mode: a registry entry names a copy's folder (the test runs the jobs in session mode).
B = CachedTable(
    "b", query="SELECT id % 10 AS k, count(*) AS n FROM range(0, 1000, 1, 2) GROUP BY id % 10", storage="files"
)

with DAG("forged_registry", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC"), catchup=False) as dag:
    writer = SparkSqlJobOperator(task_id="writer", sql="SELECT count(*) AS keys FROM b", caches=[B])
    reader = SparkSqlJobOperator(task_id="reader", sql="SELECT count(*) AS keys FROM b", caches=[B])
    writer >> reader
    release_caches()
