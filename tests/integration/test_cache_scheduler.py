"""Cached tables under a running Airflow (scheduler, API server, DAG processor): a cleared task's copy is purged,
a deleted run's copies are swept, and two runs at once each read only their own copy."""

from __future__ import annotations

import urllib.error
from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.names import flat_name
from tests.integration.airflow_services import AirflowServices, wait_for

pytestmark = pytest.mark.integration

REGISTRY_KEY = "spark_tables.cache.b"


def _finished(airflow: AirflowServices, dag_id: str, run_id: str) -> str:
    wait_for(f"{dag_id} to finish", lambda: airflow.run_state(dag_id, run_id) in ("success", "failed"), timeout=300)
    return airflow.run_state(dag_id, run_id)


def _local(location: str) -> Path:
    return Path(location.removeprefix("file://"))


def _registered(airflow: AirflowServices, dag_id: str, run_id: str, task_id: str) -> dict[str, Any] | None:
    """The registry XCom of b on a task, as the API server shows it (the stored descriptor), or None."""
    try:
        return airflow.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{REGISTRY_KEY}")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise


def test_a_cleared_task_purges_its_copy_and_a_deleted_run_is_swept(airflow: AirflowServices):
    run_id = airflow.trigger("cache_clear", {})
    assert _finished(airflow, "cache_clear", run_id) == "success"
    first = airflow.xcom("cache_clear", run_id, "writer")["caches"]["b"]
    assert first["status"] == "miss" and _local(first["location"]).exists()

    airflow.api(
        "POST",
        "/dags/cache_clear/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": ["writer"], "only_failed": False},
    )
    second_try = lambda: airflow.task_instance("cache_clear", run_id, "writer")["try_number"] == 2  # noqa: E731
    wait_for("the cleared task's second try", second_try)
    assert _finished(airflow, "cache_clear", run_id) == "success"
    second = airflow.xcom("cache_clear", run_id, "writer")["caches"]["b"]
    assert second["status"] == "miss", "its registry entry was cleared with its XComs, so b is computed again"
    assert not _local(first["location"]).exists(), "clearing the XComs purged the first copy's files"
    assert _local(second["location"]).exists()

    airflow.api("DELETE", f"/dags/cache_clear/dagRuns/{run_id}")  # the XCom rows go by cascade, unpurged
    assert _local(second["location"]).exists()
    sweep = airflow.trigger("cache_sweep", {})
    assert _finished(airflow, "cache_sweep", sweep) == "success"
    assert run_id in airflow.xcom("cache_sweep", sweep, "sweep")["swept_runs"]
    assert not _local(second["location"]).exists(), "the deleted run's copy was swept"


def test_two_runs_at_once_each_read_their_own_copy_and_keep_one(airflow: AirflowServices):
    runs = [airflow.trigger("cache_concurrent", {}) for _ in range(2)]
    assert [_finished(airflow, "cache_concurrent", run_id) for run_id in runs] == ["success", "success"]

    for run_id in runs:
        tasks = ("one", "other", "reader")
        used = {task: airflow.xcom("cache_concurrent", run_id, task)["caches"]["b"] for task in tasks}
        registered = [
            entry for task in ("one", "other") if (entry := _registered(airflow, "cache_concurrent", run_id, task))
        ]
        assert "miss" in (used["one"]["status"], used["other"]["status"])
        assert len(registered) == 1, "of two copies written at once, one stays registered"
        assert used["reader"]["status"] == "hit"
        assert used["reader"]["location"] in str(registered[0]["value"]), "the reader reads the registered copy"
        assert f"/{flat_name([run_id])}/" in used["reader"]["location"], "and it is this run's own"
        copies = [p for p in _local(used["reader"]["location"]).parent.iterdir() if p.is_dir()]
        assert copies == [_local(used["reader"]["location"])], "a withdrawn copy leaves no files"
