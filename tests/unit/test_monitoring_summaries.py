"""The monitoring pages' summaries, from XCom values shaped as the example DAGs' runs store them."""

from __future__ import annotations

from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor, CachePartition
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult
from spark_tables.core.job_result import RESULT_KINDS, xcom_fields
from spark_tables.core.lookup.result import LookupJoinResult, LookupReloadResult
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE
from spark_tables.plugins.monitoring.summaries import (
    EVICTED,
    INVALIDATED,
    KIND_SUMMARIES,
    LIVE,
    RELEASED,
    RecentResult,
    XComEntry,
    cache_storage,
    overview,
    run_summary,
    task_summary,
)

COPY_B = "file:///cache/example_spark_cache/run/b-f32b/max_b__-1__1"
COPY_B2 = "file:///cache/example_spark_cache/run/b-f32b/normalise_b__-1__1"
JOB = {
    "application_id": "local-1",
    "application_url": None,
    "master": "local[2]",
    "spark_version": "4.2.0",
    "session_seconds": 1.4,
    "work_seconds": 1.8,
}


def result(task_id: str, **value: Any) -> XComEntry:
    return XComEntry(task_id, -1, "return_value", value)


def use(status: str, location: str, **counts: Any) -> dict[str, Any]:
    return {
        "status": status,
        "hits": 0,
        "misses": 0,
        "fallbacks": 0,
        "bytes_read": 0,
        "bytes_written": 0,
        "seconds": 1.0,
        "location": location,
        "damaged": [],
        "unchecked": [],
        **counts,
    }


def descriptor(location: str, rows: list[int]) -> dict[str, Any]:
    """A registry XCom's value, as the cache-registry backend stores a descriptor."""
    return CacheDescriptor(
        name="b",
        fingerprint="f32b7e440af5ed59",
        location=location,
        format="parquet",
        schema="k bigint",
        partitions=tuple(CachePartition(f"part-{n}", count, 10 * count, 1) for n, count in enumerate(rows)),
        owner=TableOwner("example_spark_cache", "manual__1", "max_b"),
        written_at="2026-11-25T17:11:50+00:00",
    ).to_dict()


def test_a_cached_table_lists_its_copy_who_wrote_it_and_each_readers_hits() -> None:
    entries = [
        XComEntry("max_b", -1, "spark_tables.cache.b", descriptor(COPY_B, [600, 400])),
        result("max_b", **JOB, caches={"b": use("miss", COPY_B, misses=1, bytes_written=10_000)}),
        result("min_b", **JOB, caches={"b": use("hit", COPY_B, hits=1, bytes_read=10_000)}),
        result("count_b", **JOB, caches={"b": use("fallback", COPY_B, fallbacks=1)}),
    ]
    [table] = run_summary(entries)["caches"]
    assert table["name"] == "b" and table["fingerprint"] == "f32b7e440af5ed59"
    assert table["copies"] == [
        {
            "location": COPY_B,
            "written_by": "max_b",
            "rows": 1000,
            "bytes": 10_000,
            "partitions": 2,
            "written_at": "2026-11-25T17:11:50+00:00",
            "state": LIVE,
        }
    ]
    assert [(u["task_id"], u["status"]) for u in table["uses"]] == [
        ("max_b", "miss"),
        ("min_b", "hit"),
        ("count_b", "fallback"),
    ]
    assert (table["hits"], table["misses"], table["fallbacks"]) == (1, 1, 1)


def test_a_copy_is_released_invalidated_or_evicted_as_the_tasks_that_removed_it_say() -> None:
    entries = [
        result("max_b", caches={"b": use("miss", COPY_B, misses=1, bytes_written=5)}),
        result("normalise_b", caches={"b": use("miss", COPY_B2, misses=1, bytes_written=5)}, cache_evictions=[COPY_B]),
        result("invalidate_b", invalidated={"b": [COPY_B2]}),
        result("release_caches", released={"b": [COPY_B]}, swept_runs=[], usage={}),
    ]
    [table] = run_summary(entries)["caches"]
    states = {copy["location"]: (copy["state"], copy["written_by"]) for copy in table["copies"]}
    assert states == {COPY_B: (RELEASED, "max_b"), COPY_B2: (INVALIDATED, "normalise_b")}
    evicted_only = run_summary(entries[:2])["caches"][0]["copies"]
    assert [copy["state"] for copy in evicted_only] == [EVICTED, LIVE]


def test_a_released_copy_keeps_its_rows_bytes_and_writer_and_the_table_its_definition() -> None:
    """The registry XCom goes with the copy at release: the release's ``removed_copies`` say what it was."""
    query = "SELECT k, max(h) AS h FROM a GROUP BY k"
    was = {"name": "b", "location": COPY_B, "rows": 1000, "bytes": 10_000, "partitions": 2, "written_by": "max_b"}
    entries = [
        result("max_b", caches={"b": use("miss", COPY_B, misses=1, definition=query, fingerprint="f32b")}),
        result("release_caches", released={"b": [COPY_B]}, removed_copies=[{**was, "written_at": "T1"}]),
    ]
    [table] = run_summary(entries)["caches"]
    assert (table["definition"], table["fingerprint"]) == (query, "f32b")
    [copy] = table["copies"]
    assert copy == {**{k: v for k, v in was.items() if k != "name"}, "written_at": "T1", "state": RELEASED}


def test_ctas_tables_from_a_ctas_task_and_a_sql_jobs_statements() -> None:
    entries = [
        result(
            "snapshot_orders",
            table="orders_20261125",
            created=True,
            replaced=False,
            rows=100,
            bytes=4500,
            location="file:/wh/orders_20261125",
            undone_before=[],
            **JOB,
        ),
        result("retry", table="t2", created=False, reused_from_try=1, undone_before=[]),
        result(
            "summarise",
            ctas=[{"table": "scratch", "created": True, "dropped_later": True}],
            undone_before=["dropped t3, left unfinished by try 1"],
            **JOB,
        ),
    ]
    ctas = run_summary(entries)["ctas"]
    assert [(t["task_id"], t["table"], t["created"]) for t in ctas] == [
        ("snapshot_orders", "orders_20261125", True),
        ("retry", "t2", False),
        ("summarise", "scratch", True),
        ("summarise", None, None),
    ]
    assert ctas[1]["reused_from_try"] == 1 and ctas[2]["dropped_later"] is True
    assert ctas[3]["undone_before"] == "dropped t3, left unfinished by try 1"
    assert [t["steps"] for t in ctas] == [
        ["created", "complete: 100 rows, 4,500 bytes"],
        ["reused: try 1 had completed it"],
        ["created", "complete", "dropped later by the same job"],
        ["an earlier try's leftovers dropped: dropped t3, left unfinished by try 1"],
    ]


def failed_try(task_id: str, **value: Any) -> XComEntry:
    return XComEntry(task_id, -1, FAILED_TRY, value)


def test_a_failed_try_shows_its_error_its_job_and_its_ctas_table_step_by_step() -> None:
    undone_by_job = failed_try(
        "snapshot_orders",
        table="orders",
        atomicity="table",
        undone_before=["dropped the unfinished orders of try 1"],
        undone=["dropped the unfinished orders of try 2"],
        cleaned_up=True,
        try_number=2,
        error="[DIVIDE_BY_ZERO] Division by zero",
        cleanup=None,
        **JOB,
    )
    summary = task_summary([undone_by_job])
    assert summary["failure"] == {"try_number": 2, "error": "[DIVIDE_BY_ZERO] Division by zero", "cleanup": None}
    assert summary["job"] == JOB and "error" not in summary["output"]
    [table] = summary["ctas"]
    assert table["steps"] == [
        "an earlier try's leftovers dropped: dropped the unfinished orders of try 1",
        "try 2 failed: [DIVIDE_BY_ZERO] Division by zero",
        "undone by the job: dropped the unfinished orders of try 2",
    ]
    lost_driver = failed_try(
        "snapshot_orders", table="orders", cleaned_up=False, try_number=1, error="driver lost", cleanup=["dropped x"]
    )
    assert task_summary([lost_driver])["ctas"][0]["steps"][-2:] == [
        "try 1 failed: driver lost",
        "undone by the cleanup job: dropped x",
    ]
    [job] = run_summary([undone_by_job])["jobs"]
    assert job["failure"]["error"] == "[DIVIDE_BY_ZERO] Division by zero" and job["application_id"] == "local-1"


def recent(entry: XComEntry, run_id: str = "r1", at: str = "2026-11-25T10:00:00+00:00") -> RecentResult:
    return RecentResult("shop", run_id, at, entry)


def test_the_overview_shows_the_next_reload_due_failed_tries_and_what_their_cleanup_dropped() -> None:
    due = {"lookup": "customers", "due": "2026-11-25T11:00:00+00:00", "failing": 2}
    later = {**due, "due": "2026-11-25T12:00:00+00:00", "failing": 0}
    results = [
        recent(XComEntry("wait", -1, RELOAD_DUE, due)),
        recent(failed_try("load", table="t", try_number=1, error="boom", undone=["dropped t"], cleanup=None), "r2"),
        recent(XComEntry("wait", -1, RELOAD_DUE, later), "r3"),
    ]
    summary = overview(results)
    [table] = summary["lookups"]
    assert (table["next_reload"]["due"], table["next_reload"]["failing"]) == (later["due"], 0), "the latest"
    assert table["next_reload"]["reloaded_since"] is False
    reload = {"lookup": "customers", "snapshot": {"version": "v-2"}, "loads": 1, "metrics": {}, "loaded": True}
    after = overview([*results, recent(result("reload", **reload), "r3", "2026-11-25T12:00:01+00:00")])
    assert after["lookups"][0]["next_reload"]["reloaded_since"] is True, "a due time met since is not the next"
    assert [(f["run_id"], f["task_id"], f["try_number"], f["error"]) for f in summary["failed_tries"]] == [
        ("r2", "load", 1, "boom")
    ]
    assert [u["undone"] for u in summary["ctas_undone"]] == ["dropped t"]


def test_cache_storage_against_the_quota_shows_only_readable_dags_runs() -> None:
    runs = [("shop", "r1", "file:///c/shop/r1"), ("secret", "r9", "file:///c/secret/r9")]
    copies = [("file:///c/shop/r1/b/x", 300), ("file:///c/shop/r1/d/y", 200), ("file:///c/secret/r9/b/z", 500)]
    storage = cache_storage(copies, runs, quota=2000, readable={"shop"})
    assert storage == {
        "quota": 2000,
        "used": 1000,
        "share": 0.5,
        "runs": [{"dag_id": "shop", "run_id": "r1", "copies": 2, "bytes": 500}],
        "other_bytes": 500,
    }
    assert cache_storage(copies, runs, quota=None, readable=set())["share"] is None


def test_lookup_joins_and_reloads_with_their_metrics() -> None:
    metrics = {"hitCount": 17800, "missCount": 2200, "hitRate": 0.89}
    snapshot = {"version": "v-1", "rows": 1000, "bytes": 11628, "load_milliseconds": 1414}
    entries = [
        result("enrich_partial", lookup="customers", cache="PARTIAL", rows=20000, metrics=metrics, **JOB),
        result(
            "reload",
            lookup="customers",
            snapshot=snapshot,
            loads=1,
            loaded=True,
            load_failures=0,
            metrics={"loadCount": 1},
            **JOB,
        ),
        result("enrich_full", lookup="customers", cache="FULL", rows=20000, snapshot="v-1", metrics=metrics),
        result("wait_for_reload"),
    ]
    lookups = run_summary(entries)["lookups"]
    assert lookups[0] == {
        "task_id": "enrich_partial",
        "kind": "join",
        "lookup": "customers",
        "cache": "PARTIAL",
        "rows": 20000,
        "metrics": metrics,
    }
    assert lookups[1]["kind"] == "reload" and lookups[1]["snapshot"] == snapshot
    assert (lookups[2]["kind"], lookups[2]["cache"]) == ("join", "FULL")  # it names the snapshot it read
    assert len(lookups) == 3


def test_a_task_summary_separates_the_job_from_its_output() -> None:
    entries = [result("count_b", **JOB, rows=[[1]], caches={"b": use("hit", COPY_B, hits=1)})]
    summary = task_summary(entries)
    assert summary["job"] == JOB
    assert summary["output"] == {"rows": [[1]]}
    assert [c["name"] for c in summary["caches"]] == ["b"]
    assert summary["lookup"] is None and summary["ctas"] == []


def test_a_task_without_a_result_has_no_job() -> None:
    assert task_summary([])["job"] is None
    assert task_summary([XComEntry("t", -1, "return_value", "2026-11-25")])["output"] == "2026-11-25"


def test_loading_the_plugin_imports_neither_the_app_nor_the_api_server() -> None:
    """Every Airflow process loads plugins, task processes too; only the API server builds the app."""
    import subprocess
    import sys

    heavy = ("spark_tables.plugins.monitoring.app", "airflow.api_fastapi.app")
    code = f"import sys, spark_tables.plugins.monitoring.plugin; print(sorted(set({heavy!r}) & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_result_naming_its_kind_is_summarised_by_its_kind_not_by_its_keys(monkeypatch) -> None:
    """Since results carry their kind, the kind chooses the summary; keys tell only results of earlier releases."""
    seen: list[tuple[str, str]] = []

    def summary_of(kind: str) -> Any:
        def summarise(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
            seen.append((kind, value["kind"]))
            return {}

        return summarise

    for kind in RESULT_KINDS:
        monkeypatch.setitem(KIND_SUMMARIES, kind, summary_of(kind))
    cleanup = CtasCleanupResult(tables=["db.t"], undone=["dropped the unfinished db.t of try 1"])
    full_join = LookupJoinResult(
        lookup="customers", cache="FULL", rows=3, output=None, batches=1, metrics={}, snapshot="v-1"
    )
    for output in (cleanup, full_join, PlanResult(action="explain", plan_uri="file:///p.json")):
        run_summary([result("t", **xcom_fields(output.kind, output), **JOB)])
    # a cleanup's keys (undone, application_id) would have told a sql job's
    assert {kind for kind, named in seen} == {"ctas_cleanup", "lookup_join", "plan"}
    assert all(kind == named for kind, named in seen)


def test_results_naming_their_kind_render_as_before() -> None:
    ctas = CtasResult(table="orders", atomicity="table", created=True, replaced=False, rows=100, bytes=4500)
    reload = LookupReloadResult(
        lookup="customers",
        snapshot={"version": "v-1"},
        loads=1,
        load_failures=0,
        loaded=True,
        attempts=1,
        dropped=[],
        metrics={"loadCount": 1},
    )
    full_join = LookupJoinResult(
        lookup="customers", cache="FULL", rows=3, output=None, batches=1, metrics={"hitRate": 1.0}, snapshot="v-1"
    )
    entries = [
        result(task, **xcom_fields(o.kind, o), **JOB) for task, o in (("c", ctas), ("r", reload), ("j", full_join))
    ]
    summary = run_summary(entries)
    [table] = summary["ctas"]
    assert (table["task_id"], table["steps"]) == ("c", ["created", "complete: 100 rows, 4,500 bytes"])
    assert [(lookup["task_id"], lookup["kind"]) for lookup in summary["lookups"]] == [("r", "reload"), ("j", "join")]
    assert [job["task_id"] for job in summary["jobs"]] == ["c", "r", "j"]
    task = task_summary([entries[0]])
    assert task["kind"] == "ctas" and task["job"] == JOB
    assert "kind" not in task["output"] and "version" not in task["output"] and task["output"]["rows"] == 100
