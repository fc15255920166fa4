"""CTAS under a running Airflow (API server, scheduler, DAG processor): a user marks the task failed while its
job runs, and a worker is lost with its Spark driver. Neither leaves a table behind."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from spark_tables.jobs.cancellation import DEFAULT_DEADLINE_SECONDS
from tests.integration.airflow_services import AirflowServices, wait_for
from tests.integration.conftest import Deployment
from tests.integration.ctas_checks import assert_gone, metastore_tables, spark_processes

pytestmark = pytest.mark.integration


def _task_process(ti_id: str) -> psutil.Process:
    for process in psutil.process_iter():
        try:
            if f"airflow worker -- {ti_id}" in " ".join(process.cmdline()):
                return process
        except psutil.Error:
            continue
    raise AssertionError(f"no task process for {ti_id}")


def test_marking_the_task_failed_stops_the_job_and_drops_its_table(airflow: AirflowServices, postgres: Deployment):
    table = "marked_failed"
    run_id = airflow.trigger("ctas_endless", {"table": table})
    wait_for(
        "the table's creation", lambda: f"created {table}, owned by" in airflow.task_log("ctas_endless", run_id, "ctas")
    )
    spark = spark_processes(table)
    assert spark and table in metastore_tables(postgres)

    airflow.api("PATCH", f"/dags/ctas_endless/dagRuns/{run_id}/taskInstances/ctas", {"new_state": "failed"})

    _, alive = psutil.wait_procs(spark, timeout=DEFAULT_DEADLINE_SECONDS + 30)
    assert alive == [], f"the Spark application outlived the task: {alive}"
    # Airflow stops reading the task's log at once and kills it soon after: the driver finishes on its own.
    assert "asking the Spark job to stop and undo what it created" in airflow.task_log("ctas_endless", run_id, "ctas")
    assert airflow.task_state("ctas_endless", run_id, "ctas") == "failed"
    assert_gone(postgres, table)


def test_marking_a_replace_failed_keeps_the_old_table(airflow: AirflowServices, postgres: Deployment) -> None:
    table = "replace_marked_failed"
    run_id = airflow.trigger("ctas_replace_endless", {"table": table})
    wait_for(
        "the staging table's creation",
        lambda: f"created {table}__staging_" in airflow.task_log("ctas_replace_endless", run_id, "replace"),
    )
    spark = spark_processes(table)

    airflow.api("PATCH", f"/dags/ctas_replace_endless/dagRuns/{run_id}/taskInstances/replace", {"new_state": "failed"})

    _, alive = psutil.wait_procs(spark, timeout=DEFAULT_DEADLINE_SECONDS + 30)
    assert alive == [], f"the Spark application outlived the task: {alive}"
    tables = metastore_tables(postgres)
    assert {name for name in tables if name.startswith(table)} == {table}, "only the old table may be left"
    assert tables[table]["spark_tables.ctas.task_id"] == "base"
    assert any(f.startswith("part-") for f in os.listdir(Path(postgres.catalog.warehouse) / table))


def test_a_lost_worker_and_driver_are_swept_up_by_the_next_ctas(airflow: AirflowServices, postgres: Deployment):
    table = "worker_lost"
    run_id = airflow.trigger("ctas_endless", {"table": table})
    wait_for(
        "the table's creation", lambda: f"created {table}, owned by" in airflow.task_log("ctas_endless", run_id, "ctas")
    )
    ti_id = airflow.api("GET", f"/dags/ctas_endless/dagRuns/{run_id}/taskInstances/ctas")["id"]

    for process in [_task_process(ti_id), *spark_processes(table)]:  # all of it dies at once: nothing cleans up
        process.kill()
    wait_for("the task to fail", lambda: airflow.task_state("ctas_endless", run_id, "ctas") == "failed")
    assert table in metastore_tables(postgres), "nothing could clean up yet: task process and driver died together"

    sweeper = airflow.trigger("ctas_quick", {"table": "sweeper"})
    wait_for("the next CTAS", lambda: airflow.run_state("ctas_quick", sweeper) in ("success", "failed"))
    assert airflow.run_state("ctas_quick", sweeper) == "success"
    [swept] = [s for s in airflow.xcom("ctas_quick", sweeper, "ctas")["swept"] if s["tables"] == [table]]
    assert swept["owner"]["run_id"] == run_id
    assert swept["undone"] == [f"dropped the unfinished {table} of try 1"]
    assert_gone(postgres, table)
    left = list((airflow.home / "spark_tables" / "exchange").iterdir())
    assert left == [], f"claims, results or cancel markers left: {left}"
