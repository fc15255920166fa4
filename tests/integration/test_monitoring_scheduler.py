"""The monitoring's failed tries under a running Airflow (scheduler, API server, DAG processor): every failed try
of this provider's tasks, those that failed before Spark started too, each with its one-line error, an earlier
try's read from its log (its XComs were cleared when the next try started)."""

from __future__ import annotations

import pytest
from markupsafe import escape

from spark_tables.core.xcom_keys import FAILED_TRY
from tests.integration.airflow_services import AirflowServices, wait_for
from tests.integration.dags.failure_scenarios import MISSING_CONNECTION

pytestmark = pytest.mark.integration

DAG_ID, TASK_ID = "fails_before_spark", "no_spark_connection"


def _failed(airflow: AirflowServices, run_id: str) -> None:
    wait_for(f"{DAG_ID} to fail", lambda: airflow.run_state(DAG_ID, run_id) == "failed", timeout=300)


def test_every_failed_try_of_a_provider_task_is_listed_with_its_one_line_error(airflow: AirflowServices):
    run_id = airflow.trigger(DAG_ID, {})
    _failed(airflow, run_id)
    airflow.api(
        "POST",
        f"/dags/{DAG_ID}/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": [TASK_ID], "only_failed": True},
    )
    wait_for("the second try", lambda: airflow.task_instance(DAG_ID, run_id, TASK_ID)["try_number"] == 2)
    _failed(airflow, run_id)
    report = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK_ID}/xcomEntries/{FAILED_TRY}")
    error = report["value"]["error"]
    assert f"Spark connection '{MISSING_CONNECTION}' does not exist" in error and "\n" not in error

    tries = [t for t in airflow.plugin("/overview?days=1")["failed_tries"] if t["dag_id"] == DAG_ID]
    # try 2's error from its report; try 1's from its log: its report went with its XComs when try 2 started
    assert [(t["run_id"], t["task_id"], t["try_number"], t["error"]) for t in tries] == [
        (run_id, TASK_ID, 2, error),
        (run_id, TASK_ID, 1, error),
    ], "each try of the provider's task, and not the failed Python task beside it"
    page = airflow.page("/overview?days=1")
    assert page.count(str(escape(error))) == 2
