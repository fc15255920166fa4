"""Cached tables under Airflow as deployed (Celery workers, the triggerer): a cleared task's copy is purged, a
deleted run's copies are swept; single flight: consumers that start together compute b once, two runs at once each
their own, four consumers of one run, and a writer that fails is taken over by one waiter; as the monitoring tab
shows. The consumers' jobs run in session mode, on the tests' Spark Connect server (connection ``spark_session``):
their subject is the claims, the waits deferred in the triggerer and the copies' files, the same in both modes
(per job, ``test_cache.py`` and the cluster's run of the cache example, where two consumers start at once)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from spark_tables.core.names import flat_name
from tests.integration.airflow_services import AirflowServices, wait_for
from tests.integration.dags.cache_scenarios import FOUR, TOGETHER

pytestmark = pytest.mark.integration


def _local(location: str) -> Path:
    return Path(location.removeprefix("file://"))


def test_a_cleared_task_purges_its_copy_and_a_deleted_run_is_swept(airflow: AirflowServices):
    run_id = airflow.trigger("cache_clear", {})
    assert airflow.finished("cache_clear", run_id) == "success"
    first = airflow.xcom("cache_clear", run_id, "writer")["caches"]["b"]
    assert first["status"] == "miss" and _local(first["location"]).exists()

    airflow.api(
        "POST",
        "/dags/cache_clear/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": ["writer"], "only_failed": False},
    )
    second_try = lambda: airflow.task_instance("cache_clear", run_id, "writer")["try_number"] == 2  # noqa: E731
    wait_for("the cleared task's second try", second_try)
    assert airflow.finished("cache_clear", run_id) == "success"
    second = airflow.xcom("cache_clear", run_id, "writer")["caches"]["b"]
    assert second["status"] == "miss", "its registry entry was cleared with its XComs, so b is computed again"
    assert not _local(first["location"]).exists(), "clearing the XComs purged the first copy's files"
    assert _local(second["location"]).exists()

    airflow.api("DELETE", f"/dags/cache_clear/dagRuns/{run_id}")  # the XCom rows go by cascade, unpurged
    assert _local(second["location"]).exists()
    sweep = airflow.trigger("cache_sweep", {})
    assert airflow.finished("cache_sweep", sweep) == "success"
    assert run_id in airflow.xcom("cache_sweep", sweep, "sweep")["swept_runs"]
    assert not _local(second["location"]).exists(), "the deleted run's copy was swept"


def _caches(airflow: AirflowServices, dag_id: str, run_id: str, tasks: tuple[str, ...]) -> dict[str, dict]:
    return {task: airflow.xcom(dag_id, run_id, task)["caches"]["b"] for task in tasks}


def _one_miss(used: dict[str, dict]) -> str:
    """The one task that computed b (it holds a claim); every other waited for it, then read its copy."""
    [writer] = [task for task, use in used.items() if use["status"] == "miss"]
    for task, use in used.items():
        if task != writer:
            assert use["status"] == "hit" and use["location"] == used[writer]["location"], task
            assert use["claim"] is None and use["waited"]["for"] == writer, task
            assert not use["waited"]["past_bound"], task
    return writer


def test_two_runs_at_once_each_compute_b_once(airflow: AirflowServices):
    """Two runs at once, each with two consumers that start together: in each run one claims b and computes it,
    the other waits for it, deferred in the triggerer, and reads its copy; the reader reads the same, of its own
    run. The run's Spark tables tab shows one copy, computed once and read twice."""
    runs = [airflow.trigger("cache_concurrent", {}) for _ in range(2)]
    assert [airflow.finished("cache_concurrent", run_id) for run_id in runs] == ["success", "success"]

    for run_id in runs:
        used = _caches(airflow, "cache_concurrent", run_id, ("one", "other", "reader"))
        writer = _one_miss({task: used[task] for task in TOGETHER})
        waiter = "other" if writer == "one" else "one"
        assert used[writer]["claim"] == 1 and used[writer]["waited"] is None
        assert used["reader"]["status"] == "hit" and used["reader"]["waited"] is None, "b was there when it ran"
        assert f"/{flat_name([run_id])}/" in used["reader"]["location"], "the reader reads this run's own copy"
        assert "waiting, deferred, for its copy" in airflow.task_log("cache_concurrent", run_id, waiter)
        assert "cache b, claim 1: released" in airflow.trigger_log("cache_concurrent", run_id, waiter), "triggerer"
        results = {task: airflow.xcom("cache_concurrent", run_id, task)["rows"] for task in ("one", "other")}
        assert {airflow.xcom("cache_concurrent", run_id, task)["mode"] for task in used} == {"session"}
        assert results["one"] == results["other"] == airflow.xcom("cache_concurrent", run_id, "reader")["rows"]
        kept_copy = "/".join(used[writer]["location"].rstrip("/").split("/")[-2:])
        assert airflow.xcom("cache_concurrent", run_id, "copies_before_release") == [kept_copy]
        release = airflow.xcom("cache_concurrent", run_id, "release_caches")
        assert release["released"] == {"b": [used[writer]["location"]]}
        assert (release["usage"]["b"]["misses"], release["usage"]["b"]["hits"]) == (1, 2)

        [table] = airflow.plugin(f"/dags/cache_concurrent/runs/{quote(run_id, safe='')}")["caches"]
        [copy] = table["copies"]
        assert (copy["written_by"], copy["state"], copy["location"]) == (writer, "released", used[writer]["location"])
        assert copy["rows"] == used[writer]["copy_written"]["rows"] == 100
        assert [(e["event"], e["task_id"]) for e in copy["events"]] == [
            ("computed", writer),
            ("read", waiter),
            ("read", "reader"),
            ("released", "release_caches"),
        ]
        page = airflow.page(f"/dags/cache_concurrent/runs/{quote(run_id, safe='')}")
        assert '<span class="state live">' not in page and '<span class="state removed">' not in page


def test_four_consumers_at_once_compute_b_once(airflow: AirflowServices):
    run_id = airflow.trigger("cache_four_consumers", {})
    assert airflow.finished("cache_four_consumers", run_id) == "success"

    used = _caches(airflow, "cache_four_consumers", run_id, FOUR)
    writer = _one_miss(used)
    assert used[writer]["claim"] == 1
    results = [airflow.xcom("cache_four_consumers", run_id, task)["rows"] for task in FOUR]
    assert all(rows == results[0] for rows in results) and results[0][0][0] == 100
    release = airflow.xcom("cache_four_consumers", run_id, "release_caches")
    assert (release["usage"]["b"]["misses"], release["usage"]["b"]["hits"]) == (1, 3)
    [table] = airflow.plugin(f"/dags/cache_four_consumers/runs/{quote(run_id, safe='')}")["caches"]
    [copy] = table["copies"]
    assert copy["written_by"] == writer
    assert sorted(e["task_id"] for e in copy["events"] if e["event"] == "read") == sorted(set(FOUR) - {writer})


def test_when_the_writer_fails_one_waiter_takes_over(airflow: AirflowServices):
    """The consumer that claimed b fails while computing it and releases its claim; of the two consumers that found
    it claimed, exactly one takes over (claim 2) and computes b, the other waits and reads that copy. Whether the one
    that takes over was already waiting when the writer failed depends on which came first (the writer fails within
    about a second of its claim): either way it finds the writer's claim ended without a copy."""
    run_id = airflow.trigger("cache_writer_fails", {})
    assert airflow.finished("cache_writer_fails", run_id) == "failed"
    assert airflow.task_state("cache_writer_fails", run_id, "writer") == "failed"
    assert "b fails here" in airflow.task_log("cache_writer_fails", run_id, "writer")

    used = _caches(airflow, "cache_writer_fails", run_id, ("waiter_1", "waiter_2"))
    [taker] = [task for task, use in used.items() if use["status"] == "miss"]
    other = "waiter_2" if taker == "waiter_1" else "waiter_1"
    assert used[taker]["claim"] == 2
    assert used[taker]["waited"] is None or used[taker]["waited"]["for"] == "writer"
    assert "ended without a copy; this task takes over" in airflow.task_log("cache_writer_fails", run_id, taker)
    assert used[other]["status"] == "hit" and used[other]["location"] == used[taker]["location"]
    assert used[other]["claim"] is None and used[other]["waited"]["for"] in ("writer", taker)
    rows = {task: airflow.xcom("cache_writer_fails", run_id, task)["rows"] for task in used}
    assert rows["waiter_1"] == rows["waiter_2"]
    release = airflow.xcom("cache_writer_fails", run_id, "release_caches")
    assert (release["usage"]["b"]["misses"], release["usage"]["b"]["hits"]) == (1, 1)
    [table] = airflow.plugin(f"/dags/cache_writer_fails/runs/{quote(run_id, safe='')}")["caches"]
    assert [copy["written_by"] for copy in table["copies"]] == [taker]
