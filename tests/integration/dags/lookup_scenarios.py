"""A full-cache reload scheduled every 20 s after the end of the last load (FIXED_DELAY): run twice, the second
run's sensor (started a few seconds after the first run's end: a new ``airflow dags test``) defers to the trigger
until the reload is due."""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from spark_tables.core.lookup.table import LookupTable
from spark_tables.operators.lookup import SparkLookupReloadOperator
from spark_tables.sensors.lookup_reload import LookupReloadSensor

customers = LookupTable(
    name="scenario_customers",
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
    dag_id="lookup_reload_every_20s",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    LookupReloadSensor(task_id="wait_for_reload", lookup=customers, deferrable=True) >> SparkLookupReloadOperator(
        task_id="reload", lookup=customers, scheduled_for="{{ ti.xcom_pull(task_ids='wait_for_reload') }}"
    )
