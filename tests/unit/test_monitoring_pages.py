"""The monitoring pages' filters and templates: a path breaks only between its pieces, a time shows to the second,
a cached table's copies show their state with their rows and bytes, and the cache root is listed at most once a
minute."""

from __future__ import annotations

import re
from typing import Any

from spark_tables.plugins.monitoring.app import TEMPLATES, StorageListing, path, when
from spark_tables.plugins.monitoring.entries import XComEntry
from spark_tables.plugins.monitoring.overview import RecentResult, overview
from spark_tables.plugins.monitoring.summaries import task_summary
from spark_tables.tasks.cache import storage
from tests.unit.test_monitoring_summaries import JOB, result


def test_a_path_breaks_only_after_a_slash_or_a_run_ids_double_underscore() -> None:
    shown = str(path("file:///cache/etl/manual__2026-11-25T22:03:43+00:00/b-f32b/<x>"))
    pieces = re.findall(r'<span class="piece">([^<]*)</span>', shown)
    assert pieces == ["file:///", "cache/", "etl/", "manual__", "2026-11-25T22:03:43+00:00/", "b-f32b/", "&lt;x&gt;"]
    assert shown.count("<wbr>") == len(pieces) - 1, "a break allowed between pieces, and nowhere else"


def test_a_time_shows_to_the_second_with_the_whole_value_in_its_tooltip() -> None:
    assert str(when("2026-11-25T22:04:40.067211+00:00")) == (
        '<span class="when" title="2026-11-25T22:04:40.067211+00:00">2026-11-25 22:04:40</span>'
    )
    assert str(when("soon")) == '<span class="when" title="soon">soon</span>'
    assert "none" in str(when(None))


def test_each_copy_shows_its_state_rows_bytes_and_what_happened_to_it() -> None:
    events = [
        {"event": "computed", "task_id": "max_b", "reason": "miss"},
        {"event": "removed", "task_id": "max_b", "reason": "min_b registered its copy first"},
    ]
    copy = {"location": "file:///c/b/max_b", "written_by": "max_b", "rows": 20000, "bytes": 1368855, "partitions": 2}
    table = {"name": "b", "fingerprint": "f32b", "definition": "SELECT 1", "hits": 0, "misses": 1, "fallbacks": 0}
    summary = {"caches": [{**table, "copies": [{**copy, "events": events, "state": "removed"}], "uses": []}]}
    page = TEMPLATES.get_template("run.html").render(
        dag_id="d",
        run_id="r",
        summary={**summary, "ctas": [], "lookups": [], "jobs": []},
        api_url="/api",
        lookup_chart="",
        task_url=lambda task_id, index: "/t",
    )
    row = page.split('<table class="copies">', 1)[1].split("</table>", 1)[0]
    assert '<span class="state removed">removed</span>' in row and "20,000" in row and "1,368,855" in row
    assert "removed by max_b</span>: min_b registered its copy first" in row


def test_the_cache_root_is_listed_at_most_once_a_minute(tmp_path, monkeypatch) -> None:
    """Every overview request reads one listing; a new one is taken only once the last is a minute old."""
    listed: list[str] = []
    monkeypatch.setattr(storage, "copies", lambda root: listed.append(root) or [])
    monkeypatch.setattr(storage, "runs", lambda root: [])
    now = [1000.0]
    listing = StorageListing(seconds=60, clock=lambda: now[0])

    for _ in range(3):
        listing("file:///cache")
    now[0] += 59.9
    listing("file:///cache")
    assert listed == ["file:///cache"]
    now[0] += 0.1
    listing("file:///cache")
    listing("file:///other-cache")
    assert listed == ["file:///cache", "file:///cache", "file:///other-cache"]


def _worker(hits: int, misses: int, records: int) -> dict[str, Any]:
    counts = {"hitCount": hits, "missCount": misses, "loadCount": misses, "numLoadFailure": 0, "latestLoadTime": 3}
    return {**counts, "numCachedRecords": records, "numCachedBytes": 100 * records, "hitRate": hits / (hits + misses)}


def test_a_partial_joins_metrics_show_their_units_that_they_are_sums_and_each_workers_own() -> None:
    """5,000 keys looked up by two workers, each with a cache of its own: the sums count each key twice."""
    workers = [_worker(500, 5000, 4500), _worker(400, 5000, 4500)]
    metrics = {**_worker(900, 10000, 9000), "latestLoadTime": 12, "hitRate": 900 / 10900}
    join = result("enrich", lookup="customers", cache="PARTIAL", rows=10900, metrics=metrics, worker_metrics=workers)
    summary = task_summary([XComEntry("enrich", -1, "return_value", {"kind": "lookup_join", "version": 1,
                                                                    **join.value, **JOB})])  # fmt: skip
    page = TEMPLATES.get_template("task.html").render(
        dag_id="d", run_id="r", task_id="enrich", map_index=-1, summary=summary, output_json="{}", plan="", api_url="/a"
    )
    sums = dict(
        re.findall(r"<tr><th>(\w+)</th><td class=\"n\">([^<]+)</td></tr>", page.split('id="lookup-metrics"')[1])
    )
    assert (sums["latestLoadTime"], sums["numCachedBytes"], sums["missCount"]) == ("12 ms", "900,000 bytes", "10,000")
    assert sums["hitRate"].strip() == "8.3 %"
    assert "Summed over the 2 executor Python worker(s) that looked keys up, each with a cache of its own" in page
    per_worker = page.split('id="lookup-worker-metrics"')[1].split("</table>")[0]
    assert per_worker.count("<tr><td>") == 2 and "4,500" in per_worker and "3 ms" in per_worker


def test_no_load_yet_is_said_so_not_shown_as_minus_one() -> None:
    page = TEMPLATES.get_template("macros.html").module.metric("latestLoadTime", -1)
    assert str(page) == "no load yet"


def test_the_overview_shows_reload_columns_only_where_a_full_cache_gives_them_meaning() -> None:
    partial = {"lookup": "stores", "rows": 10, "metrics": {"hitRate": 0.5}, "cache": "PARTIAL"}
    full = {"lookup": "customers", "rows": 10, "metrics": {"hitRate": 1.0}, "cache": "FULL"}
    joins = [result("enrich_stores", "lookup_join", **partial), result("enrich_customers", "lookup_join", **full)]
    summary = overview([RecentResult("etl", "r1", f"T{n}", join) for n, join in enumerate(joins, 1)])
    page = TEMPLATES.get_template("overview.html").render(
        summary={**summary, "cache_storage": {"error": "not listed"}, "truncated": False},
        days=7, dag_count=1, charts={"lookups": "", "caches": "", "storage": ""}, api_url="/a",
    )  # fmt: skip
    rows = page.split('id="lookup-tables"')[1].split("</table>")[0].split("<tr>")[2:]
    customers, stores = rows  # by name
    assert "no reloads: PARTIAL looks each key up (only a FULL cache is reloaded)" in stores
    assert "no reload sensor" not in stores and "no reload</td>" not in stores
    assert "no reload</td>" in customers and "no reload sensor" in customers
