"""A full-cache reload every 20 s after the end of the last load (FIXED_DELAY), of a table the test makes and
drops: each ``airflow dags test`` run is one turn of the ``@continuous`` reload DAG. The second run's sensor waits
until the reload is due; once the table is gone, loads fail and the sensor backs off from 15 s, doubling. And the
same reload of the example's customers, under the scheduler (``lookup_reload_deferred``)."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.core.lookup.table import LookupTable
from spark_tables.operators.lookup import SparkLookupReloadOperator
from spark_tables.sensors.lookup_reload import LookupReloadSensor


def _reloaded_every_20_s(name: str, table: str, interval: str = "20 s", **options: str) -> LookupTable:
    """A full cache of ``table``, reloaded 20 s (or ``interval``) after the end of the last load (FIXED_DELAY)."""
    return LookupTable(
        name=name,
        conn_id="spark_tables_lookup_demo",
        table=table,
        key=("customer_id",),
        options={
            "lookup.cache": "FULL",
            "lookup.full-cache.periodic-reload.interval": interval,
            "lookup.full-cache.periodic-reload.schedule-mode": "FIXED_DELAY",
            **options,
        },
    )


def _reload_dag(dag_id: str, lookup: LookupTable, **sensor: str) -> DAG:
    """One turn of a reload DAG: the sensor waits (deferred) until the reload is due, then the reload."""
    with DAG(dag_id=dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
        LookupReloadSensor(task_id="wait_for_reload", lookup=lookup, deferrable=True, **sensor) >> (
            SparkLookupReloadOperator(
                task_id="reload", lookup=lookup, scheduled_for="{{ ti.xcom_pull(task_ids='wait_for_reload') }}"
            )
        )
    return dag


customers = _reloaded_every_20_s(
    "scenario_customers", "spark_tables_demo.scenario_customers", **{"lookup.max-retries": "0"}
)
dag = _reload_dag("lookup_reload_scenario", customers, failure_backoff="15 s")
# The example's customers (which its seed task makes and keeps): under the scheduler, its second run's sensor waits
# in the triggerer until the reload is due (tests/integration/test_cluster.py). 60 s: the second run's sensor must
# start before then, after the first run ends, the scheduler queues the second and a Celery worker starts it.
deferred = _reload_dag(
    "lookup_reload_deferred", _reloaded_every_20_s("deferred_customers", "spark_tables_demo.customers", "60 s")
)
