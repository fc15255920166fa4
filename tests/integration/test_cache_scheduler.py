"""Cached tables under a running Airflow (scheduler, API server, DAG processor): a cleared task's copy is purged,
a deleted run's copies are swept, and two runs at once each read only their own copy, as the monitoring tab shows."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from spark_tables.core.names import flat_name
from tests.integration.airflow_services import AirflowServices, wait_for

pytestmark = pytest.mark.integration


def _finished(airflow: AirflowServices, dag_id: str, run_id: str) -> str:
    wait_for(f"{dag_id} to finish", lambda: airflow.run_state(dag_id, run_id) in ("success", "failed"), timeout=300)
    return airflow.run_state(dag_id, run_id)


def _local(location: str) -> Path:
    return Path(location.removeprefix("file://"))


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
    """Two runs at once, each with two consumers that start together: both miss and write a copy, the copy
    registered first stays, the other is withdrawn with its files; the reader reads the one kept, of its own run.
    The run's Spark tables tab then shows each copy as what happened to it: the one withdrawn removed, the one kept
    released, both with their rows and bytes; neither live."""
    runs = [airflow.trigger("cache_concurrent", {}) for _ in range(2)]
    assert [_finished(airflow, "cache_concurrent", run_id) for run_id in runs] == ["success", "success"]

    for run_id in runs:
        tasks = ("one", "other", "reader")
        used = {task: airflow.xcom("cache_concurrent", run_id, task)["caches"]["b"] for task in tasks}
        assert (used["one"]["status"], used["other"]["status"]) == ("miss", "miss"), "each looked b up first"
        assert used["reader"]["status"] == "hit"
        assert f"/{flat_name([run_id])}/" in used["reader"]["location"], "the reader reads this run's own copy"
        kept = next(task for task in ("one", "other") if used[task]["location"] == used["reader"]["location"])
        lost = "other" if kept == "one" else "one"
        assert used[lost]["copies_removed"] == [
            {"location": used[lost]["location"], "reason": f"{kept} registered its copy first"}
        ]
        assert f"removed the copy at {used[lost]['location']}" in airflow.task_log("cache_concurrent", run_id, lost)
        kept_copy = "/".join(used[kept]["location"].rstrip("/").split("/")[-2:])
        assert airflow.xcom("cache_concurrent", run_id, "copies_before_release") == [kept_copy], (
            "a withdrawn copy leaves no files"
        )
        release = airflow.xcom("cache_concurrent", run_id, "release_caches")
        assert release["released"] == {"b": [used[kept]["location"]]}, "of two copies written at once, one stayed"

        [table] = airflow.plugin(f"/dags/cache_concurrent/runs/{quote(run_id, safe='')}")["caches"]
        copies = {copy["written_by"]: copy for copy in table["copies"]}
        assert set(copies) == {"one", "other"}
        for task, state in ((kept, "released"), (lost, "removed")):
            written = used[task]["copy_written"]
            assert (copies[task]["location"], copies[task]["state"]) == (used[task]["location"], state), task
            assert (copies[task]["rows"], copies[task]["bytes"]) == (written["rows"], written["bytes"]), task
            assert written["rows"] == 100 and written["bytes"] == used[task]["bytes_written"] > 0, task
        assert [(e["event"], e["task_id"]) for e in copies[lost]["events"]] == [("computed", lost), ("removed", lost)]
        assert [(e["event"], e["task_id"]) for e in copies[kept]["events"]] == [
            ("computed", kept),
            ("read", "reader"),
            ("released", "release_caches"),
        ]
        page = airflow.page(f"/dags/cache_concurrent/runs/{quote(run_id, safe='')}")
        assert '<span class="state live">' not in page and page.count('<span class="state removed">') == 1
