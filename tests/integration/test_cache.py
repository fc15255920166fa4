"""Cached tables through `airflow dags test`, per-job on the embedded default and in session mode on a Spark Connect
server: one DAG run from the first use of b to its release, with b on files in either mode and in the server's memory,
and eviction under a small quota, in the server's memory and on files (in session mode: the cache root's
bookkeeping is the Airflow side's, the same per job). What a task did is read from its XComs (its job's own report of
hits, misses and fallbacks, not its time); what lies on disk is read from the cache root, what the server holds from
the server."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import SCENARIOS, Deployment

pytestmark = pytest.mark.integration

REGISTRY_KEY = "spark_tables.cache.b"


def _run(deployment: Deployment, dag_id: str) -> str:
    done = deployment.with_dags(SCENARIOS).airflow("dags", "test", dag_id)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        return db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (dag_id,)).fetchone()[0]


def _xcoms(deployment: Deployment, dag_id: str, run_id: str, key: str = "return_value") -> dict[str, Any]:
    """The run's XCom values under ``key``, by task, as stored (no backend involved)."""
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = ?", (dag_id, run_id, key)
        ).fetchall()
    return {task: json.loads(value) for task, value in rows}


def _copies(deployment: Deployment) -> list[str]:
    """Every part file under the cache root, of any run."""
    root = deployment.home / "spark_tables" / "cache"
    return sorted(
        os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names if name.startswith("part-")
    )


#: The deployment of each mode: spark-submit on the embedded default, and a Spark Connect server.
MODES = {"per-job": "embedded", "session": "in_session"}


@pytest.fixture(scope="module", params=sorted(MODES))
def lifecycle(request: pytest.FixtureRequest) -> tuple[Deployment, str, str]:
    """One run of cache_lifecycle in each mode: its deployment, run id and mode."""
    deployment = request.getfixturevalue(MODES[request.param])
    return deployment, _run(deployment, "cache_lifecycle"), request.param


def test_a_run_computes_b_once_reads_it_after_falls_back_when_it_is_damaged_and_releases_it(
    lifecycle: tuple[Deployment, str, str],
):
    deployment, run_id, mode = lifecycle
    out = _xcoms(deployment, "cache_lifecycle", run_id)
    b = {task: out[task]["caches"]["b"] for task in ("first", "second", "third", "fourth")}
    assert {out[task]["mode"] for task in b} == {mode}

    assert out["nothing_yet"] == [], "declaring b wrote nothing: the first user computes it"
    assert [b[t]["status"] for t in b] == ["miss", "hit", "fallback", "miss"]
    assert (b["first"]["misses"], b["second"]["hits"], b["third"]["fallbacks"]) == (1, 1, 1)
    assert b["second"]["location"] == b["first"]["location"] and b["second"]["bytes_written"] == 0
    assert b["second"]["bytes_read"] == b["first"]["bytes_written"] > 0
    assert out["first"]["rows"] == out["second"]["rows"] == out["third"]["rows"] == out["fourth"]["rows"]
    assert out["first"]["rows"][0][0] == 100

    lost = out["lose_a_partition"]
    assert b["third"]["damaged"] == [{"location": b["first"]["location"], "problem": f"partition {lost} is missing"}]
    assert out["forget_b"]["invalidated"] == {"b": [b["third"]["location"]]}
    [forgotten] = out["forget_b"]["removed_copies"]  # the copy as it was, its registry entry gone with it
    assert (forgotten["location"], forgotten["written_by"], forgotten["rows"]) == (b["third"]["location"], "third", 100)
    assert forgotten["bytes"] == b["third"]["bytes_written"] > 0
    assert out["after_invalidating"] == [], "invalidation deleted the copy's files at once"
    assert b["fourth"]["location"] not in (b["first"]["location"], b["third"]["location"])

    assert out["release_caches"]["usage"]["b"] == {
        "hits": 1,
        "misses": 2,
        "fallbacks": 1,
        "bytes_read": b["second"]["bytes_read"],
        "bytes_written": b["first"]["bytes_written"] + b["third"]["bytes_written"] + b["fourth"]["bytes_written"],
    }
    assert out["release_caches"]["released"] == {"b": [b["fourth"]["location"]]}
    assert _xcoms(deployment, "cache_lifecycle", run_id, REGISTRY_KEY) == {}, "no registry entry is left"
    assert _copies(deployment) == [], "nothing of the run is left under the cache root"


def test_in_session_mode_b_is_kept_in_the_servers_memory_read_from_there_recomputed_once_lost_and_released(
    in_session: Deployment, connect_server: Any
):
    check_cache_in_memory(in_session, connect_server)


def check_cache_in_memory(in_session: Deployment, connect_server: Any) -> dict[str, Any]:
    """Run cache_in_memory on the server of ``in_session`` and check it (on local Spark or the standalone cluster);
    the run's XComs by task."""
    from tests.integration.dags.cache_scenarios import spark_tables_views

    run_id = _run(in_session, "cache_in_memory")
    out = _xcoms(in_session, "cache_in_memory", run_id)
    b = {task: out[task]["caches"]["b"] for task in ("first", "second", "third", "fourth")}

    assert [b[t]["status"] for t in b] == ["miss", "hit", "fallback", "miss"]
    assert {out[task]["mode"] for task in b} == {"session"}
    application = connect_server.application_id()
    assert b["first"]["location"].startswith(f"memory:{application}/global_temp.spark_tables_b_")
    assert b["second"]["location"] == b["first"]["location"] and b["second"]["bytes_written"] == 0
    assert b["second"]["bytes_read"] == b["first"]["bytes_written"] > 0
    assert out["first"]["rows"] == out["second"]["rows"] == out["third"]["rows"] == out["fourth"]["rows"]
    assert out["first"]["rows"][0][0] == 100

    lost = out["uncache_b"]
    assert b["third"]["damaged"] == [
        {"location": b["first"]["location"], "problem": f"its view {lost} is no longer cached on the server"}
    ]
    third_view = b["third"]["location"].rsplit(".", 1)[1]
    assert out["forget_b"]["invalidated"] == {"b": [b["third"]["location"]]}
    assert third_view not in out["views_after_invalidating"], "invalidation released the copy on the server"
    assert lost.rsplit(".", 1)[1] not in out["views_after_invalidating"], "the lost copy's view was dropped"
    assert out["release_caches"]["released"] == {"b": [b["fourth"]["location"]]}
    assert _xcoms(in_session, "cache_in_memory", run_id, REGISTRY_KEY) == {}, "no registry entry is left"
    assert spark_tables_views(connect_server.url) == [], "nothing is left on the server"
    assert _copies(in_session) == [], "no copy was written to files"
    return out


def test_ordinary_xcoms_round_trip_unchanged_through_the_cache_registry_backend(
    lifecycle: tuple[Deployment, str, str],
):
    deployment, run_id, _ = lifecycle

    assert _xcoms(deployment, "cache_lifecycle", run_id)["pull_ordinary_values"] is True  # compared in the task
    stored = _xcoms(deployment, "cache_lifecycle", run_id, "pushed")["push_ordinary_values"]
    assert stored["text"] == "spark_tables.cache.b" and stored["nested"]["rows"] == [[1, "a", None, 2.5, True]]


def test_past_the_memory_quota_the_least_recently_used_copy_is_released_on_the_server_and_computed_again(
    in_session: Deployment, connect_server: Any
):
    from tests.integration.dags.cache_scenarios import spark_tables_views

    one_copy_too_many = dataclasses.replace(
        in_session, env={**in_session.env, "AIRFLOW__SPARK_TABLES__CACHE_MEMORY_QUOTA": "1 B"}
    )
    run_id = _run(one_copy_too_many, "cache_memory_quota")
    out = _xcoms(in_session, "cache_memory_quota", run_id)

    first_b, c = out["use_b"]["caches"]["b"], out["use_c"]["caches"]["c"]
    assert (first_b["status"], c["status"]) == ("miss", "miss")
    assert first_b["location"].startswith("memory:") and c["location"].startswith("memory:")
    assert out["use_b"]["cache_evictions"] == [], "the copy a task has just used is never evicted"
    assert out["use_c"]["cache_evictions"] == [first_b["location"]]
    b_view = first_b["location"].rsplit(".", 1)[1]
    assert b_view not in out["views_after_c"] and c["location"].rsplit(".", 1)[1] in out["views_after_c"]
    again = out["use_b_again"]["caches"]["b"]
    assert again["status"] == "fallback"
    assert again["damaged"] == [
        {"location": first_b["location"], "problem": f"its view global_temp.{b_view} is gone from the server"}
    ]
    assert out["use_b_again"]["rows"] == out["use_b"]["rows"]
    assert spark_tables_views(connect_server.url) == [], "the release left nothing on the server"


def test_past_the_quota_the_least_recently_used_copy_is_evicted_and_computed_again(in_session: Deployment):
    """The cache root's quota, on files (in session mode; its bookkeeping is the Airflow side's, the same per job)."""
    one_copy_too_many = dataclasses.replace(
        in_session, env={**in_session.env, "AIRFLOW__SPARK_TABLES__CACHE_QUOTA": "1 B"}
    )
    run_id = _run(one_copy_too_many, "cache_quota")
    out = _xcoms(in_session, "cache_quota", run_id)
    assert {out[task]["mode"] for task in ("use_b", "use_c", "use_b_again")} == {"session"}

    first_b = out["use_b"]["caches"]["b"]
    assert out["use_b"]["cache_evictions"] == [], "the copy a task has just used is never evicted"
    assert out["use_c"]["caches"]["c"]["status"] == "miss"
    assert out["use_c"]["cache_evictions"] == [first_b["location"]]
    again = out["use_b_again"]["caches"]["b"]
    assert again["status"] == "fallback"
    assert again["damaged"] == [{"location": first_b["location"], "problem": "its folder is gone"}]
    assert out["use_b_again"]["rows"] == out["use_b"]["rows"]
    assert _copies(in_session) == []


def test_beside_the_object_storage_backend_the_registry_works_and_every_other_value_goes_to_storage(
    in_session: Deployment,
):
    """``[spark_tables] other_xcom_backend``: the common-io provider's backend keeps every XCom but the registry's (a
    threshold of 0 sends each to storage); b is computed once, read once from the registry, and released (in
    session mode, b on files: the backends are the Airflow side's, the same per job)."""
    store = in_session.home / "xcom_objects"
    beside = dataclasses.replace(
        in_session,
        env={
            **in_session.env,
            "AIRFLOW__SPARK_TABLES__OTHER_XCOM_BACKEND": (
                "airflow.providers.common.io.xcom.backend.XComObjectStorageBackend"
            ),
            "AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_PATH": f"file://{store}",
            "AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_THRESHOLD": "0",
        },
    )
    run_id = _run(beside, "cache_beside_object_storage")
    stored = _xcoms(in_session, "cache_beside_object_storage", run_id)

    assert set(stored) == {"first", "second", "push_ordinary_values", "pull_ordinary_values", "release_caches"}
    assert all(str(value).startswith(f"file://{store}/") for value in stored.values()), stored  # paths, as stored
    out = {task: json.loads(Path(path.removeprefix("file://")).read_text()) for task, path in stored.items()}
    assert out["first"]["caches"]["b"]["status"] == "miss"
    assert out["second"]["caches"]["b"]["status"] == "hit"  # the registry's descriptor read back as one
    assert out["second"]["rows"] == out["first"]["rows"]
    assert out["pull_ordinary_values"] is True  # compared in the task, read back from storage
    assert out["first"]["mode"] == "session"
    assert _xcoms(in_session, "cache_beside_object_storage", run_id, REGISTRY_KEY) == {}, "released: its rows purged"
    assert _copies(in_session) == [], "the release purged the copy's files through the registry"
