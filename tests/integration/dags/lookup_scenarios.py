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

customers = LookupTable(
    name="scenario_customers",
    conn_id="spark_tables_lookup_demo",
    table="spark_tables_demo.scenario_customers",
    key=("customer_id",),
    options={
        "lookup.cache": "FULL",
        "lookup.full-cache.periodic-reload.interval": "20 s",
        "lookup.full-cache.periodic-reload.schedule-mode": "FIXED_DELAY",
        "lookup.max-retries": "0",
    },
)

with DAG(
    dag_id="lookup_reload_scenario",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    LookupReloadSensor(
        task_id="wait_for_reload", lookup=customers, deferrable=True, failure_backoff="15 s"
    ) >> SparkLookupReloadOperator(
        task_id="reload", lookup=customers, scheduled_for="{{ ti.xcom_pull(task_ids='wait_for_reload') }}"
    )

#: The example's customers (which its seed task makes and keeps), reloaded 20 s after the end of the last load.
deferred_customers = LookupTable(
    name="deferred_customers",
    conn_id="spark_tables_lookup_demo",
    table="spark_tables_demo.customers",
    key=("customer_id",),
    options={
        "lookup.cache": "FULL",
        "lookup.full-cache.periodic-reload.interval": "20 s",
        "lookup.full-cache.periodic-reload.schedule-mode": "FIXED_DELAY",
    },
)

with DAG(
    dag_id="lookup_reload_deferred",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
):
    # Its second run's sensor waits in the triggerer until the reload is due (tests/integration/test_as_deployed.py).
    LookupReloadSensor(
        task_id="wait_for_reload", lookup=deferred_customers, deferrable=True
    ) >> SparkLookupReloadOperator(
        task_id="reload", lookup=deferred_customers, scheduled_for="{{ ti.xcom_pull(task_ids='wait_for_reload') }}"
    )
