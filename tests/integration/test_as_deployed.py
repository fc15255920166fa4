"""A CTAS under Airflow as deployed (API server, scheduler, DAG processor, triggerer, a Celery worker; PostgreSQL
metadata DB, Redis broker) whose Celery worker was lost, cleaned up by its failure callback. The example DAGs as
deployed, and a reload sensor waiting in the triggerer, are in test_cluster.py, on the Spark standalone cluster."""

from __future__ import annotations

import psutil
import pytest

from tests.integration.airflow_services import AirflowServices, wait_for
from tests.integration.conftest import Deployment
from tests.integration.ctas_checks import assert_gone, metastore_tables, spark_processes

pytestmark = pytest.mark.integration


def test_a_ctas_whose_worker_was_lost_is_cleaned_up_by_its_failure_callback(
    airflow: AirflowServices, postgres: Deployment
):
    """The Celery worker running a CTAS is SIGKILLed with the job's driver, as a machine lost: nothing in the task
    can clean up. Airflow finds the task's heartbeats gone and fails it; its failure callback, run by the DAG
    processor, runs the cleanup job, which drops the table. A new worker takes the next tasks."""
    table = "lost_with_its_worker"
    run_id = airflow.trigger("ctas_endless", {"table": table})
    created = lambda: f"created {table}, owned by" in airflow.task_log("ctas_endless", run_id, "ctas")  # noqa: E731
    wait_for("the table's creation", created)
    spark = spark_processes(table)
    assert spark and table in metastore_tables(postgres)

    killed = airflow.kill_worker()
    for process in spark:
        process.kill()
    psutil.wait_procs(spark, timeout=30)
    assert len(killed) > 1, "the worker's group held its task processes too"
    airflow.start_worker()

    wait_for("the lost task to fail", lambda: airflow.task_state("ctas_endless", run_id, "ctas") == "failed")
    claims = lambda: list((airflow.home / "spark_tables" / "exchange").glob("ctas_endless__*.claim.json"))  # noqa: E731
    wait_for("the failure callback's cleanup job to release the claim", lambda: not claims(), timeout=300)
    assert_gone(postgres, table)
    assert f"cleanup job for {table}" in airflow.dag_processor_log("ctas_scenarios.py"), "the failure callback's"
