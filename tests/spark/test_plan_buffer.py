"""The buffer between an aggregation and its sink (FLIP-365) on the shared local session: only each key's latest
change goes out, once per interval window or on a flush request; processing time is a fixed clock per run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from spark_tables.core.plan.aggregates import AggregateCall
from spark_tables.jobs.changelog import UPDATE_BEFORE
from spark_tables.jobs.plan.group_aggregate import group_aggregate
from spark_tables.jobs.streaming.buffer import FLUSH_CAUSE, buffered
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.jobs.streaming.flush_requests import flush_requests, prepare_requests, request_flush
from tests.spark.plan_streams import SHORT_NAMES, JsonSource, run, stream_session

pytestmark = pytest.mark.spark

SECOND = 1000
INTERVAL = 10 * SECOND
VIEWS = AggregateCall("count", None, "views")


@pytest.fixture(autouse=True)
def _stream_session(spark: SparkSession) -> Iterator[None]:
    with stream_session(spark):
        yield


class PageViews:
    """Page views counted per page, through the buffer, one available-now run per step."""

    def __init__(self, spark: SparkSession, root: Path, interval_ms: int = INTERVAL) -> None:
        self.spark, self.interval_ms = spark, interval_ms
        self.views = JsonSource(root / "views", "page string")
        self.requests = str(root / "requests")
        self.checkpoint = root / "checkpoint"
        prepare_requests(spark, self.requests)

    def frame(self, at_ms: int) -> DataFrame:
        clock = FixedClock(at_ms)
        counts = group_aggregate(self.views.stream(self.spark), ["page"], [VIEWS], 0, clock)
        return buffered(counts, ["page"], self.interval_ms, clock, flush_requests(self.spark, self.requests))

    def step(self, at_ms: int, *pages: str, flush: str | None = None) -> list[tuple[str, str, int, str]]:
        """Views of ``pages`` (and a flush request) at ``at_ms``: what the buffer emitted, as (cause, kind, page,
        views)."""
        if pages:
            self.views.add(*({"page": page} for page in pages))
        if flush:
            request_flush(self.spark, self.requests, flush)
        return sorted(_emitted(row) for row in run(self.frame(at_ms), self.checkpoint))


def _emitted(row: Row) -> tuple[str, str, int, str]:
    return (row[FLUSH_CAUSE], SHORT_NAMES[row["__row_kind"]], row["page"], row["views"])


def test_only_each_keys_latest_change_goes_out_when_its_window_ends(spark: SparkSession, tmp_path: Path) -> None:
    pages = PageViews(spark, tmp_path)
    assert pages.step(1 * SECOND, "a", "a", "b") == []
    assert pages.step(9 * SECOND, "b", "a") == []
    # The window [0 s, 10 s) has ended: every bucket flushes what it held before this batch (those without rows in
    # it woken by a timer); c, viewed at 10 s, falls in the next window.
    assert pages.step(10 * SECOND, "c") == [("interval", "+U", "a", 3), ("interval", "+U", "b", 2)]
    assert pages.step(20 * SECOND, "d") == [("interval", "+I", "c", 1)]
    assert pages.step(21 * SECOND, flush="end") == [("end", "+I", "d", 1)]


def test_a_flush_request_empties_the_buffer_at_once(spark: SparkSession, tmp_path: Path) -> None:
    pages = PageViews(spark, tmp_path)
    assert pages.step(1 * SECOND, "a", "b") == []
    assert pages.step(2 * SECOND, flush="idle") == [("idle", "+I", "a", 1), ("idle", "+I", "b", 1)]
    assert pages.step(3 * SECOND, "b", flush="end") == [("end", "+U", "b", 2)]


def test_buffered_results_equal_unbuffered_ones_with_fewer_records(spark: SparkSession, tmp_path: Path) -> None:
    """The same views with and without the buffer: each page's last value is the same, in fewer records."""
    steps = [(1, ("a", "b", "a")), (4, ("a", "c")), (7, ("a", "c", "c")), (11, ("a",)), (25, ("b",))]
    pages = PageViews(spark, tmp_path)
    emitted = [change for at, views in steps for change in pages.step(at * SECOND, *views)]
    emitted += pages.step(26 * SECOND, flush="end")
    # Without the buffer, each file is a micro-batch, which sends every page it changed.
    counts = group_aggregate(pages.views.stream(spark, file_per_batch=True), ["page"], [VIEWS], 0, FixedClock(0))
    unbuffered = [row for row in run(counts, tmp_path / "unbuffered") if row["__row_kind"] != UPDATE_BEFORE]

    assert {page: views for _, _, page, views in emitted} == {row["page"]: row["views"] for row in unbuffered}
    assert {page: views for _, _, page, views in emitted} == {"a": 5, "b": 2, "c": 3}
    assert (len(emitted), len(unbuffered)) == (5, 8)
