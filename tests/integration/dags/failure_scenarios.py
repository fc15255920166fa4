"""DAGs whose tasks fail, for the monitoring's list of failed tries: one of this provider's Spark job tasks that
fails before Spark starts (its Spark connection does not exist), and a Python task that fails beside it."""

from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG

from spark_tables.operators.sql import SparkSqlJobOperator

#: The Spark connection the job task names, which no test creates.
MISSING_CONNECTION = "no_such_spark"


def _fail() -> None:
    raise RuntimeError("not one of this provider's tasks")


with DAG(
    dag_id="fails_before_spark", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC"), catchup=False
):
    SparkSqlJobOperator(task_id="no_spark_connection", sql="SELECT 1", conn_id=MISSING_CONNECTION)
    PythonOperator(task_id="plain_python", python_callable=_fail)
