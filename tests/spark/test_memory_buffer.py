"""FLIP-365's ``execution.flush.memory-buffer-only`` on a streaming aggregation into PostgreSQL: the buffer in the
driver, flushed on the interval, when full, on request and at the end (in watermark order: test_streaming_aggregation);
a failure between flushes writes what it holds; a driver killed between flushes loses it, and the next run says so."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import JobError
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.jobs.aggregation.runner import aggregation_confs, aggregation_query, run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.session_conf import session_conf
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.jobs.streaming.memory_buffer import MemoryBuffer
from tests.spark.page_views import PG_SCHEMA, T0, add_views, pg_sink, pg_table
from tests.spark.postgres import PG, run_sql

pytestmark = pytest.mark.spark

VIEWS_PER_PAGE = "SELECT page, count(*) AS views, sum(ms) AS total_ms FROM STREAM(views) GROUP BY page"
COLUMNS = "page text PRIMARY KEY, views bigint, total_ms bigint"
MINUTE = 60_000


@dataclass
class SteppingClock:
    """Each micro-batch 40 s after the one before, from T0 (the memory buffer reads it in the driver, once a
    batch)."""

    step_ms: int = 40_000
    calls: list[int] = field(default_factory=list)

    def now_ms(self, timer_values: Any) -> int:
        self.calls.append(T0 + len(self.calls) * self.step_ms)
        return self.calls[-1]


def _job(query: str, table: str, checkpoint: Path, **configuration: str) -> StreamingAggregationJob:
    return StreamingAggregationJob(
        query=query,
        sink=pg_sink(table, COLUMNS),
        checkpoint=str(checkpoint),
        options=StreamingOptions(
            configuration={"execution.flush.max-interval": "1 min", "execution.flush.memory-buffer-only": "true",
                           **configuration},
            connections={table: dict(PG)},
        ),
    )  # fmt: skip


def _expected(spark: SparkSession) -> list[tuple]:
    spark.catalog.refreshTable("views")
    return sorted(map(tuple, spark.sql(VIEWS_PER_PAGE.replace("STREAM(views)", "views")).collect()))


def test_a_memory_buffer_flushes_on_the_interval_when_full_and_at_the_end(
    spark: SparkSession, views: Path, tmp_path: Path
) -> None:
    """Batches at T0, +40 s, +80 s, +120 s (one file each), a 1 min interval, room for 3 keys: the third batch first
    flushes what the first two left (its minute is over), then its own 3 pages fill the buffer; the last page goes
    out at the end."""
    add_views(views, "a", ("home", "u1", 10, "2026-01-01 00:00:01"), ("docs", "u1", 20, "2026-01-01 00:00:02"))
    add_views(views, "b", ("home", "u2", 30, "2026-01-01 00:00:03"))
    add_views(
        views,
        "c",
        ("home", "u3", 40, "2026-01-01 00:00:04"),
        ("blog", "u3", 50, "2026-01-01 00:00:05"),
        ("news", "u3", 60, "2026-01-01 00:00:06"),
    )
    add_views(views, "d", ("docs", "u4", 70, "2026-01-01 00:00:07"))
    job = _job(VIEWS_PER_PAGE, "memory_stats", tmp_path / "checkpoint", **{"state.backend.cache.max-entries-num": "3"})
    clock = SteppingClock()

    done = run_streaming_aggregation(spark, job, Cancellation(), clock).query

    assert clock.calls == [T0, T0 + 40_000, T0 + 80_000, T0 + 120_000]
    assert done["buffer"] == {
        "store": "memory",
        "records_in": 7,
        "records_emitted": 6,  # home and docs, then home, blog and news, then docs: 7 rows in, 4 batches
        "flushes": {"interval": 1, "idle": 0, "end": 1, "full": 1},
    }
    assert (done["batches"], done["write_calls"], done["rows_upserted"]) == (4, 3, 6)
    assert pg_table("memory_stats") == _expected(spark)
    assert not (tmp_path / "checkpoint-memory-buffer").exists()  # nothing left buffered
    # The state store holds the aggregation's state only: no buffer operator.
    assert [operator["operator"] for operator in done["state_operators"]] == ["stateStoreSave"]


def test_an_idle_request_flushes_a_memory_buffer_at_once(spark: SparkSession, views: Path, tmp_path: Path) -> None:
    add_views(views, "a", ("home", "u1", 10, "2026-01-01 00:00:01"), ("docs", "u1", 20, "2026-01-01 00:00:02"))
    job = _job(VIEWS_PER_PAGE, "idle_stats", tmp_path / "checkpoint", **{"execution.flush.max-interval": "1 h"})
    with session_conf(spark, aggregation_confs(spark, job)):
        query = aggregation_query(spark, job, FixedClock(T0))
        assert isinstance(query.buffer, MemoryBuffer)
        query.start(True).awaitTermination()
        assert pg_table("idle_stats") == []  # buffered
        query.buffer.request("idle")
    assert pg_table("idle_stats") == _expected(spark)
    assert query.buffer.flushes == {"interval": 0, "idle": 1, "end": 0, "full": 0}


def test_a_run_that_fails_between_flushes_writes_what_its_memory_buffer_holds(
    spark: SparkSession, views: Path, tmp_path: Path
) -> None:
    """The third batch fails in Spark (a view too slow to be true); the first two batches' results, buffered, are
    written before the failure goes on; the failed batch, not committed, runs again when the run is retried."""
    query = VIEWS_PER_PAGE.replace(
        "sum(ms)", "sum(CASE WHEN ms < 1000 THEN ms ELSE raise_error('a view too slow to be true') END)"
    )
    add_views(views, "a", ("home", "u1", 10, "2026-01-01 00:00:01"), ("docs", "u1", 20, "2026-01-01 00:00:02"))
    add_views(views, "b", ("home", "u2", 30, "2026-01-01 00:00:03"))
    add_views(views, "c", ("home", "u3", 5000, "2026-01-01 00:00:04"))
    job = _job(query, "failing_stats", tmp_path / "checkpoint", **{"execution.flush.max-interval": "1 h"})

    with pytest.raises(Exception, match="a view too slow to be true"):
        run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0))

    assert pg_table("failing_stats") == [("docs", 1, 20), ("home", 2, 40)]
    assert not (tmp_path / "checkpoint-memory-buffer").exists()


def test_a_driver_killed_between_flushes_loses_the_buffered_results_and_the_next_run_says_so(
    spark: SparkSession, views: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What memory-buffer-only trades on Spark: the query below runs and commits its batches, and its driver never
    reaches its exit path (as when killed), so the buffer is never written. The next run warns, naming the first
    batch whose output is missing; the key it changes again is right, the other keeps its earlier value (none)."""
    add_views(views, "a", ("home", "u1", 10, "2026-01-01 00:00:01"), ("docs", "u1", 20, "2026-01-01 00:00:02"))
    job = _job(VIEWS_PER_PAGE, "killed_stats", tmp_path / "checkpoint", **{"execution.flush.max-interval": "1 h"})
    with session_conf(spark, aggregation_confs(spark, job)):
        killed = aggregation_query(spark, job, FixedClock(T0))
        killed.start(True).awaitTermination()
    left = (tmp_path / "checkpoint-memory-buffer").iterdir()
    assert [path.name for path in left if not path.name.startswith(".")] == ["pending-since-batch-0"]

    add_views(views, "b", ("home", "u2", 30, "2026-01-01 00:00:03"))
    with caplog.at_level(logging.WARNING, logger=MemoryBuffer.__module__):
        run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0))

    warnings = [r for r in caplog.records if r.name == MemoryBuffer.__module__ and r.levelno >= logging.WARNING]
    assert [record.getMessage() for record in warnings] == [
        "memory buffer of sink killed_stats: the run that ended before this one did not flush its buffer (its driver "
        "was killed): the output of its micro-batches from batch 0 on is missing from "
        f"{PG_SCHEMA}.killed_stats, and each key they changed keeps its earlier value there until it changes again; "
        "to rebuild the table, run once from a new checkpoint, or run without execution.flush.memory-buffer-only"
    ]
    assert pg_table("killed_stats") == [("home", 2, 40)]  # docs, changed only in the lost batch, is missing
    assert not (tmp_path / "checkpoint-memory-buffer").exists()


def test_a_sink_that_fails_at_the_end_flush_fails_the_run(spark: SparkSession, views: Path, tmp_path: Path) -> None:
    """A flush that cannot write is the run's error, with its sink and cause named."""
    add_views(views, "a", ("home", "u1", 10, "2026-01-01 00:00:01"))
    job = _job(VIEWS_PER_PAGE, "refusing_stats", tmp_path / "checkpoint", **{"execution.flush.max-interval": "1 h"})
    run_sql(f"ALTER TABLE {PG_SCHEMA}.refusing_stats ADD CHECK (views > 5)")
    with pytest.raises(JobError, match=r"^postgres sink refusing_stats: end flush failed on table "):
        run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0))
