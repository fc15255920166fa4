"""The monitoring pages' summaries, from XCom values shaped as the example DAGs' runs store them."""

from __future__ import annotations

import dataclasses
from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor, CachePartition
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult
from spark_tables.core.job_result import RESULT_VERSION, xcom_fields
from spark_tables.core.kinds import KINDS
from spark_tables.core.lookup.result import LookupJoinResult, LookupReloadResult
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE
from spark_tables.plugins.monitoring.cache_copies import (
    EVICTED,
    INVALIDATED,
    LIVE,
    RELEASED,
    REMOVED,
    cache_storage,
    copy_state,
    memory_storage,
)
from spark_tables.plugins.monitoring.entries import XComEntry
from spark_tables.plugins.monitoring.failed_tries import FailedTry, error_line, failed_tries
from spark_tables.plugins.monitoring.overview import RecentResult, overview
from spark_tables.plugins.monitoring.summaries import run_label, run_summary, task_summary

COPY_B = "file:///cache/example_spark_cache/run/b-f32b/max_b__-1__1"
COPY_B2 = "file:///cache/example_spark_cache/run/b-f32b/normalise_b__-1__1"
JOB = {
    "application_id": "local-1",
    "application_url": None,
    "master": "local[2]",
    "mode": "per-job",
    "spark_version": "4.2.0",
    "session_seconds": 1.4,
    "work_seconds": 1.8,
}


def result(task_id: str, kind: str | None = None, **value: Any) -> XComEntry:
    """A task's result; of a job of ``kind``, it names its kind and version as every job's output does."""
    return XComEntry(task_id, -1, "return_value", _named(kind, value))


def _named(kind: str | None, value: dict[str, Any]) -> dict[str, Any]:
    return value if kind is None else {"kind": kind, "version": RESULT_VERSION, **value}


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
            "events": [
                {"event": "computed", "task_id": "max_b", "reason": "miss"},
                {"event": "read", "task_id": "min_b", "reason": None},
            ],
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
    registered = XComEntry("normalise_b", -1, "spark_tables.cache.b", descriptor(COPY_B2, [5]))
    evicted_only = run_summary([*entries[:2], registered])["caches"][0]["copies"]
    assert [copy["state"] for copy in evicted_only] == [EVICTED, LIVE], "the other copy is live while registered"


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
    assert {key: copy[key] for key in (*was, "written_at", "state") if key != "name"} == {
        **{k: v for k, v in was.items() if k != "name"},
        "written_at": "T1",
        "state": RELEASED,
    }


def test_of_two_copies_computed_at_once_one_is_removed_and_the_other_released_each_with_its_rows_and_bytes():
    """max_b and min_b missed at once: min_b registered first, max_b withdrew its copy; the release then removed
    min_b's with its registry entry. Neither is live, and both keep their rows and bytes."""
    winner = {"rows": 1000, "bytes": 10_000, "partitions": 2}
    loser = {"rows": 1000, "bytes": 10_400, "partitions": 2}
    withdrawn = {"location": COPY_B, "reason": "min_b registered its copy first"}
    max_b = use("miss", COPY_B, misses=1, bytes_written=10_400, copy_written=loser, copies_removed=[withdrawn])
    min_b = use("miss", COPY_B2, misses=1, bytes_written=10_000, copy_written=winner, copies_removed=[])
    was = {"name": "b", "location": COPY_B2, **winner, "written_by": "min_b", "written_at": "T1"}
    before_release = [
        XComEntry("min_b", -1, "spark_tables.cache.b", descriptor(COPY_B2, [600, 400])),
        result("min_b", caches={"b": min_b}),
        result("max_b", caches={"b": max_b}),
        result("count_b", caches={"b": use("hit", COPY_B2, hits=1, bytes_read=10_000)}),
    ]
    release = result("release_caches", released={"b": [COPY_B2]}, removed_copies=[was], swept_runs=[], usage={})
    after_release = [entry for entry in before_release if entry.key == "return_value"] + [release]

    def copies(entries: list[XComEntry]) -> dict[str, tuple[Any, ...]]:
        [table] = run_summary(entries)["caches"]
        return {c["location"]: (c["written_by"], c["state"], c["rows"], c["bytes"]) for c in table["copies"]}

    assert copies(before_release) == {COPY_B2: ("min_b", LIVE, 1000, 10_000), COPY_B: ("max_b", REMOVED, 1000, 10_400)}
    assert copies(after_release) == {
        COPY_B2: ("min_b", RELEASED, 1000, 10_000),
        COPY_B: ("max_b", REMOVED, 1000, 10_400),
    }
    [table] = run_summary(after_release)["caches"]
    events = {c["location"]: [(e["event"], e["task_id"], e["reason"]) for e in c["events"]] for c in table["copies"]}
    assert events[COPY_B] == [("computed", "max_b", "miss"), ("removed", "max_b", "min_b registered its copy first")]
    assert events[COPY_B2] == [
        ("computed", "min_b", "miss"),
        ("read", "count_b", None),
        ("released", "release_caches", None),
    ]


def test_a_copy_no_task_says_ended_and_no_registry_entry_names_is_removed_never_live():
    """A result of an earlier release names a copy it wrote, but not its withdrawal: with no registry entry, the
    copy is in no registry any more."""
    entries = [result("max_b", caches={"b": use("miss", COPY_B, misses=1, bytes_written=5)})]
    [copy] = run_summary(entries)["caches"][0]["copies"]
    assert (copy["state"], copy["bytes"], copy["rows"]) == (REMOVED, 5, None)


def test_a_damaged_copy_is_removed_by_the_task_that_found_it():
    problem = "partition part-0.parquet is missing"
    fallback = use(
        "fallback",
        COPY_B2,
        fallbacks=1,
        bytes_written=7,
        damaged=[{"location": COPY_B, "problem": problem}],
        copy_written={"rows": 3, "bytes": 7, "partitions": 1},
        copies_removed=[{"location": COPY_B, "reason": f"damaged: {problem}"}],
    )
    entries = [
        XComEntry("max_b", -1, "spark_tables.cache.b", descriptor(COPY_B, [600, 400])),
        result("max_b", caches={"b": use("miss", COPY_B, misses=1, bytes_written=10_000)}),
        XComEntry("min_b", -1, "spark_tables.cache.b", descriptor(COPY_B2, [3])),
        result("min_b", caches={"b": fallback}),
    ]
    entries = [entries[1], *entries[2:]]  # the damaged copy's registry entry went with it
    copies = {c["location"]: c for c in run_summary(entries)["caches"][0]["copies"]}
    assert copies[COPY_B]["state"] == REMOVED
    assert copies[COPY_B]["events"][-1] == {"event": "removed", "task_id": "min_b", "reason": f"damaged: {problem}"}
    assert (copies[COPY_B2]["state"], copies[COPY_B2]["rows"]) == (LIVE, 3)


def test_a_copys_state_is_the_last_event_that_ended_it_else_evicted_else_live_while_registered():
    def events(*names: str) -> list[dict[str, Any]]:
        return [{"event": name, "task_id": "t", "reason": None} for name in names]

    assert copy_state(events("computed", "read"), registered=True) == LIVE
    assert copy_state(events("computed", "read"), registered=False) == REMOVED
    assert copy_state(events("computed", "evicted"), registered=True) == EVICTED
    assert copy_state(events("computed", "evicted", "released"), registered=False) == RELEASED
    assert copy_state(events("computed", "invalidated"), registered=False) == INVALIDATED


def test_ctas_tables_from_a_ctas_task_and_a_sql_jobs_statements() -> None:
    entries = [
        result(
            "snapshot_orders",
            "ctas",
            table="orders_20261125",
            created=True,
            replaced=False,
            rows=100,
            bytes=4500,
            location="file:/wh/orders_20261125",
            undone_before=[],
            **JOB,
        ),
        result("retry", "ctas", table="t2", created=False, reused_from_try=1, undone_before=[]),
        result(
            "summarise",
            "sql",
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


def test_a_delta_ctas_at_its_first_version_is_listed_as_its_job_wrote_it() -> None:
    made = CtasResult(table="totals", atomicity="commit", created=True, format="delta", rows=7, committed_version=0)
    entry = XComEntry("publish", -1, "return_value", {**xcom_fields("ctas", made), **JOB})

    [table] = run_summary([entry])["ctas"]

    assert (table["task_id"], table["table"], table["steps"]) == ("publish", "totals", ["created", "complete: 7 rows"])


def failed_try(task_id: str, kind: str | None = None, **value: Any) -> XComEntry:
    return XComEntry(task_id, -1, FAILED_TRY, _named(kind, value))


def test_a_failed_try_shows_its_error_its_job_and_its_ctas_table_step_by_step() -> None:
    undone_by_job = failed_try(
        "snapshot_orders",
        "ctas",
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
        "snapshot_orders",
        "ctas",
        table="orders",
        cleaned_up=False,
        try_number=1,
        error="driver lost",
        cleanup=["dropped x"],
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
        recent(
            failed_try("load", "ctas", table="t", try_number=1, error="boom", undone=["dropped t"], cleanup=None), "r2"
        ),
        recent(XComEntry("wait", -1, RELOAD_DUE, later), "r3"),
    ]
    summary = overview(results)
    [table] = summary["lookups"]
    assert (table["next_reload"]["due"], table["next_reload"]["failing"]) == (later["due"], 0), "the latest"
    assert table["next_reload"]["reloaded_since"] is False
    reload = {"lookup": "customers", "snapshot": {"version": "v-2"}, "loads": 1, "metrics": {}, "loaded": True}
    after = overview([*results, recent(result("reload", "lookup_reload", **reload), "r3", "2026-11-25T12:00:01+00:00")])
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


def test_copies_in_servers_memory_are_summed_by_server_against_the_memory_quota() -> None:
    held = [("spark_session", 300), ("spark_session", 200), ("other_server", 1000)]

    assert memory_storage(held, quota=2000) == [
        {"server": "other_server", "copies": 1, "bytes": 1000, "share": 0.5},
        {"server": "spark_session", "copies": 2, "bytes": 500, "share": 0.25},
    ]
    assert [m["share"] for m in memory_storage(held, quota=None)] == [None, None]
    assert memory_storage([], quota=2000) == []


def test_lookup_joins_and_reloads_with_their_metrics() -> None:
    metrics = {"hitCount": 17800, "missCount": 2200, "hitRate": 0.89}
    delta = {"format": "delta", "location": "file:/w/dims.db/customers", "number": 3, "commit": "c3"}
    snapshot = {"version": "v-1", "rows": 1000, "bytes": 11628, "load_milliseconds": 1414, "table_version": delta}
    entries = [
        result(
            "enrich_partial", "lookup_join", lookup="customers", cache="PARTIAL", rows=20000, metrics=metrics, **JOB
        ),
        result(
            "reload",
            "lookup_reload",
            lookup="customers",
            snapshot=snapshot,
            loads=1,
            loaded=True,
            load_failures=0,
            metrics={"loadCount": 1},
            **JOB,
        ),
        result(
            "enrich_full",
            "lookup_join",
            lookup="customers",
            cache="FULL",
            rows=20000,
            snapshot="v-1",
            table_version=delta,
            metrics=metrics,
        ),
        result(
            "reload_again",
            "lookup_reload",
            lookup="customers",
            snapshot=snapshot,
            loads=1,
            loaded=False,
            unchanged=True,
            load_failures=0,
            metrics={"loadCount": 1},
        ),
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
        "worker_metrics": [],
        "definition": None,
        "snapshot": None,
        "table_version": None,
    }
    assert lookups[1]["kind"] == "reload" and lookups[1]["snapshot"] == snapshot
    assert (lookups[1]["loaded"], lookups[1]["unchanged"], lookups[1]["table_version"]) == (True, False, 3)
    full = lookups[2]
    assert (full["kind"], full["cache"], full["snapshot"], full["table_version"]) == ("join", "FULL", "v-1", 3)
    assert (lookups[3]["loaded"], lookups[3]["unchanged"]) == (False, True), "a reload that found the table unchanged"
    assert len(lookups) == 4


def test_a_task_summary_separates_the_job_from_its_output() -> None:
    entries = [result("count_b", "sql", **JOB, rows=[[1]], caches={"b": use("hit", COPY_B, hits=1)})]
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
    """Results carry their kind, and the kind chooses the summary, not the result's keys."""
    seen: list[tuple[str, str]] = []

    def summary_of(kind: str) -> Any:
        def summarise(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
            seen.append((kind, value["kind"]))
            return {}

        return summarise

    for name, kind in list(KINDS.items()):
        monkeypatch.setitem(KINDS, name, dataclasses.replace(kind, summary=summary_of(name)))
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


def test_the_overview_keeps_each_dags_cached_table_and_lookup_table_apart() -> None:
    """Two DAGs each with a cached table b (of other definitions), and a lookup table each: four rows, each with
    its DAG; a result without a definition (an earlier release's) joins its DAG's one table of its name."""
    b_one = use("miss", COPY_B, misses=1, fingerprint="f1", definition="SELECT 1", seconds=6.0)
    b_two = use("miss", COPY_B2, misses=1, fingerprint="f2", definition="SELECT 2", seconds=2.0)
    read_old = use("hit", COPY_B, hits=1, seconds=1.0)  # no fingerprint: an earlier release's result
    read_memory = use("hit", COPY_B, hits=1, fingerprint="f1", seconds=0.25, read_from="memory")  # session mode
    join = {"lookup": "customers", "rows": 10, "metrics": {"hitRate": 0.5}}
    due = {"lookup": "customers", "due": "D", "failing": 0}
    results = [
        RecentResult("etl", "r1", "T1", result("max_b", caches={"b": b_one})),
        RecentResult("etl", "r1", "T2", result("min_b", caches={"b": read_old})),
        RecentResult("etl", "r1", "T2", result("min_b_again", caches={"b": read_memory})),
        RecentResult("report", "r2", "T3", result("make_b", caches={"b": b_two})),
        RecentResult(
            "etl", "r1", "T4", result("enrich", "lookup_join", cache="FULL", lookup_definition="db.c on pg", **join)
        ),
        RecentResult(
            "report", "r2", "T5", result("enrich", "lookup_join", cache="NONE", lookup_definition="db.d on pg", **join)
        ),
        RecentResult("etl", "r1", "T6", XComEntry("wait", -1, RELOAD_DUE, due)),
    ]
    summary = overview(results)
    caches = [
        (t["dag_id"], t["name"], t["fingerprint"], len(t["reads"]), len(t["recomputes"])) for t in summary["caches"]
    ]
    assert caches == [("etl", "b", "f1", 2, 1), ("report", "b", "f2", 0, 1)]
    # a copy read from files and one read from a server's memory, each averaged apart
    reads = [(len(t["file_reads"]), t["mean_file_read_seconds"], len(t["memory_reads"]), t["mean_memory_read_seconds"])
             for t in summary["caches"]]  # fmt: skip
    assert reads == [(1, 1.0, 1, 0.25), (0, None, 0, None)]
    lookups = [(t["dag_id"], t["name"], t["definition"], t["modes"]) for t in summary["lookups"]]
    assert lookups == [
        ("etl", "customers", "db.c on pg", ["FULL"]),
        ("report", "customers", "db.d on pg", ["NONE"]),
    ]
    assert summary["lookups"][0]["next_reload"]["due"] == "D" and summary["lookups"][1]["next_reload"] is None


def test_every_failed_try_is_listed_with_its_reports_error_newest_first() -> None:
    """Airflow's record of failed tries, merged with the reports the Spark job operators leave: a try that failed
    before Spark started, retried, has no report left (its XComs were cleared): its error comes from its log."""
    tries = [
        FailedTry("shop", "r1", "enrich", -1, 1, "2026-11-25T10:00:00+00:00"),
        FailedTry("shop", "r1", "enrich", -1, 2, "2026-11-25T10:05:00+00:00"),
    ]
    reported = [
        {"dag_id": "shop", "run_id": "r1", "task_id": "enrich", "map_index": -1, "try_number": 2,
         "at": "2026-11-25T10:05:01+00:00", "error": "connection 'pg' does not exist", "cleanup": None},
        {"dag_id": "shop", "run_id": "r0", "task_id": "load", "map_index": -1, "try_number": 1,
         "at": "2026-11-24T09:00:00+00:00", "error": "boom", "cleanup": None},
    ]  # fmt: skip
    rows = failed_tries(tries, reported)
    assert [(r["run_id"], r["task_id"], r["try_number"], r["error"]) for r in rows] == [
        ("r1", "enrich", 2, "connection 'pg' does not exist"),
        ("r1", "enrich", 1, None),
        ("r0", "load", 1, "boom"),
    ]


def test_a_failed_tries_error_line_is_the_logged_exception_in_one_line() -> None:
    def failed(kind: str, value: str) -> dict[str, Any]:
        detail = [{"exc_type": kind, "exc_value": value, "is_cause": False, "frames": []}]
        return {"event": "Task failed with exception", "error_detail": detail}

    spec = "lookup table customers: connection 'pg' does not exist: create it (type postgres)"
    assert error_line([{"event": "starting"}, failed("AirflowFailException", spec)]) == spec
    assert error_line([failed("KeyError", "'x'\nmore")]) == "KeyError: 'x'"
    assert error_line([failed("RuntimeError", "")]) == "RuntimeError"
    assert error_line([failed("ValueError", "first"), failed("AirflowException", "last")]) == "last"
    assert error_line([{"event": "done"}]) is None


def test_a_run_is_labelled_by_its_kind_and_time_so_runs_stay_apart() -> None:
    assert run_label("manual__2026-11-25T22:03:43.622423+00:00") == "manual 2026-11-25 22:03:43"
    assert run_label("scheduled__2026-11-25T00:00:00+00:00") == "scheduled 2026-11-25 00:00:00"
    assert run_label("my own run") == "my own run"


def test_the_overview_shows_the_copies_kept_in_servers_memory_apart_from_the_files(spark_tables_home, monkeypatch):
    """A copy kept in memory has a record folder under the cache root: it is counted by server against the memory
    quota, not as bytes on files; the page shows the table."""
    from spark_tables.core.cache.layout import memory_location
    from spark_tables.plugins.monitoring.app import overview_charts, render, storage_use
    from spark_tables.plugins.monitoring.overview import overview
    from spark_tables.tasks.cache import storage
    from spark_tables.utils import settings

    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__CACHE_MEMORY_QUOTA", "8 KiB")
    view = "spark_tables_b_0123456789abcdef_0a0b0c0d"  # as memory_view names it
    storage.record_memory_copy(
        f"{settings.cache_uri()}/shop/r1/b-0123456789abcdef/{view}",
        memory_location("app-1", f"global_temp.{view}"),
        "spark_session",
        4096,
    )

    use = storage_use({"shop"})

    assert use["used"] == 0, "a record's own small files are not copies on files"
    assert use["memory"] == [{"server": "spark_session", "copies": 1, "bytes": 4096, "share": 0.5}]
    summary = {**overview([]), "days": 7, "dag_ids": ["shop"], "results": 0, "truncated": False}
    summary |= {"failed_tries": [], "failed_tries_truncated": False, "cache_storage": use}
    page = render("overview.html", summary=summary, days=7, dag_count=1, charts=overview_charts(summary), api_url="")
    assert 'id="cache-memory"' in page.body.decode()
    assert "spark_session" in page.body.decode() and "against a quota of 8,192 bytes a server" in page.body.decode()
