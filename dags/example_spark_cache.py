"""FLIP-36's motivating program as a DAG: a table b derived from a through an expensive step, used by four tasks.

``b`` is declared once as a cached table. Declaring it runs nothing; the first of ``max_b`` / ``min_b`` to run
computes b and writes it to cache storage, and every later task of the run reads that copy instead of
recomputing it (their XCom ``caches`` says hit or miss). ``count_b`` declares the same b in SQL, which is the same
cache. ``release_caches`` is the run's teardown: it deletes the run's copies whether the tasks succeeded or not.

Runs on the embedded default (local[*] Spark, Derby metastore under AIRFLOW_HOME/spark_tables) with the
cache-registry XCom backend: AIRFLOW__CORE__XCOM_BACKEND=spark_tables.xcom.cache_registry.CacheRegistryXComBackend.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.core.cache.table import CachedTable
from spark_tables.operators.cache import release_caches
from spark_tables.operators.ctas import SparkCtasOperator
from spark_tables.operators.sql import SparkSqlJobOperator

#: The expensive step: a SHA-256 per row of a, aggregated to one row per key.
B_QUERY = """
    SELECT k, count(*) AS n, sum(v) AS total, max(sha2(CAST(id * v AS STRING), 256)) AS h
    FROM flip36_a GROUP BY k
"""
b = CachedTable("b", query=B_QUERY)

with DAG(
    dag_id="example_spark_cache",
    schedule=None,
    start_date=pendulum.datetime(2026, 11, 1, tz="UTC"),
    catchup=False,
    tags=["spark_tables", "example"],
) as dag:
    make_a = SparkCtasOperator(
        task_id="make_a",
        sql="""CREATE TABLE IF NOT EXISTS flip36_a
               AS SELECT id, id % 20000 AS k, CAST(id % 997 AS DOUBLE) AS v FROM range(2000000)""",
    )
    max_b = SparkSqlJobOperator(
        task_id="max_b", sql="SELECT max(total) AS max_total, max(h) AS max_h FROM b", caches=[b]
    )
    min_b = SparkSqlJobOperator(
        task_id="min_b", sql="SELECT min(total) AS min_total, min(h) AS min_h FROM b", caches=[b]
    )
    normalise_b = SparkSqlJobOperator(
        task_id="normalise_b",
        sql="""
            SELECT k, (total - {{ ti.xcom_pull('min_b')['rows'][0][0] }})
                      / ({{ ti.xcom_pull('max_b')['rows'][0][0] }} - {{ ti.xcom_pull('min_b')['rows'][0][0] }})
                      AS normalised, h
            FROM b ORDER BY normalised DESC, k LIMIT 5
        """,
        caches=[b],
    )
    count_b = SparkSqlJobOperator(
        task_id="count_b",
        sql=[f"CREATE TEMPORARY VIEW b CACHED AS {B_QUERY}", "SELECT count(*) AS keys, sum(n) AS rows FROM b"],
    )
    make_a >> [max_b, min_b] >> normalise_b >> count_b
    release_caches()
