"""The monitoring pages' filters and templates: a path breaks only between its pieces, a time shows to the second,
a cached table's copies show their state with their rows and bytes, and the cache root is listed at most once a
minute."""

from __future__ import annotations

import re

from spark_tables.hooks.cache import storage
from spark_tables.plugins.monitoring.app import TEMPLATES, StorageListing, path, when


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
