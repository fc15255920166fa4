"""DAGs of the durable-job fault tests, run by the scheduler and a Celery worker on the standalone cluster.

Each job waits at a gate the test holds closed: a PostgreSQL advisory lock that the job's reads take shared
(``pg_advisory_lock_shared``) and the test holds exclusively. So the test knows the driver is at work (its read
waits in ``pg_locks``), kills what it means to kill, waits for the next try to find the driver, and only then opens
the gate: no race with how fast this machine is. Each task has one retry, one second after the loss is noticed.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from spark_tables.core.lookup.table import LookupTable
from spark_tables.operators.cache import release_caches
from spark_tables.operators.ctas import SparkCtasOperator
from spark_tables.operators.lookup import SparkLookupReloadOperator
from spark_tables.operators.sql import SparkSqlJobOperator

#: The gate, a table of the catalog read through JDBC (the test creates it): one row once the lock is free.
GATE = "durable_gate"
TABLE = "{{ dag_run.conf['table'] }}"
#: Per job, on the cluster's master (``spark_per_job``): a durable job is a detached spark-submit driver.
_DAG = {
    "schedule": None,
    "start_date": pendulum.datetime(2026, 11, 1, tz="UTC"),
    "catchup": False,
    "default_args": {"conn_id": "spark_per_job"},
}
_RETRY = {"retries": 1, "retry_delay": timedelta(seconds=1)}
_JDBC = {"jars": POSTGRES_JDBC_DRIVER}

with DAG(dag_id="durable_ctas", **_DAG):
    SparkCtasOperator(
        task_id="ctas",
        table=TABLE,
        query=f"SELECT id, sha2(CAST(id AS STRING), 256) AS h FROM range(0, 100000, 1, 2) CROSS JOIN {GATE}",
        **_RETRY,
        **_JDBC,
    )

#: A cached table behind the gate: its producer is the task the test's worker loses.
B = CachedTable(
    "durable_b",
    query=f"""SELECT id % 100 AS k, count(*) AS n, max(sha2(CAST(id AS STRING), 256)) AS h
              FROM range(0, 200000, 1, 4) CROSS JOIN {GATE} GROUP BY id % 100""",
)

with DAG(dag_id="durable_cache", **_DAG):
    produce = SparkSqlJobOperator(
        task_id="produce", sql="SELECT count(*) AS keys, sum(n) AS rows FROM durable_b", caches=[B], **_RETRY, **_JDBC
    )
    consume = SparkSqlJobOperator(
        task_id="consume", sql="SELECT count(*) AS keys, max(h) AS h FROM durable_b", caches=[B], **_JDBC
    )
    produce >> consume
    release_caches()

#: A full-cache lookup table whose PostgreSQL view waits at the gate.
CUSTOMERS = LookupTable(
    name="durable_customers",
    conn_id="spark_tables_lookup_demo",
    table="spark_tables_demo.durable_customers",
    key=("customer_id",),
    options={"lookup.cache": "FULL", "lookup.full-cache.periodic-reload.interval": "1 h", "lookup.max-retries": "0"},
)

with DAG(dag_id="durable_lookup_reload", **_DAG):
    SparkLookupReloadOperator(task_id="reload", lookup=CUSTOMERS, **_RETRY)

#: A cached table its producer computes at once; its consumer reads the copy behind the gate, on the executor whose
#: worker the test kills.
C = CachedTable(
    "durable_c",
    query="SELECT id % 100 AS k, max(sha2(CAST(id AS STRING), 256)) AS h FROM range(0, 100000, 1, 4) GROUP BY id % 100",
)

with DAG(dag_id="durable_cache_consumer", **_DAG):
    SparkSqlJobOperator(
        task_id="produce", sql="SELECT count(*) AS keys FROM durable_c", caches=[C]
    ) >> SparkSqlJobOperator(
        task_id="consume",
        sql=f"SELECT count(*) AS keys, count(DISTINCT h) AS hashes FROM durable_c CROSS JOIN {GATE}",
        caches=[C],
        **_JDBC,
    )
    release_caches()
