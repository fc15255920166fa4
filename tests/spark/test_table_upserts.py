"""A streaming aggregation upserted by key into a catalog table (``TableUpsertSink``), buffered and not: the table
equal to Spark's batch aggregation, the rows it held before kept, a version per write, a replayed batch skipped,
and what it cannot take refused before any query."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import JobError, SpecError
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import TableUpsertSink
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.jobs.table_format import file_streams
from tests.spark.page_views import T0, TWO_RUNS, add_views, lose_commit

pytestmark = pytest.mark.spark

VIEWS_PER_PAGE = "SELECT page, count(*) AS views, sum(ms) AS total_ms FROM STREAM(views) GROUP BY page"


def _table_sink(spark: SparkSession, db: str, name: str) -> TableUpsertSink:
    """A parquet table of the views per page, holding a page the stream never changes."""
    spark.sql(f"CREATE TABLE {db}.{name} (page STRING, views BIGINT, total_ms BIGINT) USING parquet")
    spark.sql(f"INSERT INTO {db}.{name} VALUES ('legacy', 7, 70)")
    return TableUpsertSink(name=f"{db}.{name}", key=("page",))


def _run(
    spark: SparkSession, sink: TableUpsertSink, checkpoint: Path, at_ms: int = T0, **configuration: str
) -> dict[str, Any]:
    job = StreamingAggregationJob(
        query=VIEWS_PER_PAGE,
        sink=sink,
        checkpoint=str(checkpoint),
        options=StreamingOptions(configuration=configuration),
    )
    return run_streaming_aggregation(spark, job, Cancellation(), FixedClock(at_ms)).query


def _rows(spark: SparkSession, name: str) -> list[tuple]:
    spark.catalog.refreshTable(name)
    return sorted(map(tuple, spark.table(name).collect()))


def _expected(spark: SparkSession) -> list[tuple]:
    spark.catalog.refreshTable("views")
    batch = spark.sql(VIEWS_PER_PAGE.replace("STREAM(views)", "views")).collect()
    return sorted([("legacy", 7, 70), *map(tuple, batch)])


def _location(spark: SparkSession, name: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
    return next(row.data_type for row in rows if row.col_name == "Location")


def test_a_catalog_table_is_kept_equal_to_the_aggregation_by_key_buffered_or_not(
    spark: SparkSession, db: str, views: Path, tmp_path: Path
) -> None:
    plain, buffered = _table_sink(spark, db, "plain_views"), _table_sink(spark, db, "buffered_views")
    first_location = _location(spark, plain.name)
    reports = []
    for step, files in enumerate(TWO_RUNS):
        for name, rows in files:
            add_views(views, name, *rows)
        at = T0 + step * 1000
        reports.append(
            (
                _run(spark, plain, tmp_path / "plain", at),
                _run(spark, buffered, tmp_path / "buffered", at, **{"execution.flush.max-interval": "1 h"}),
            )
        )
        assert _rows(spark, plain.name) == _rows(spark, buffered.name) == _expected(spark)

    (plain_1, buffered_1), (plain_2, _buffered_2) = reports
    # A version per batch that changed the table, unbuffered; one per flush, buffered.
    assert (plain_1["write_calls"], plain_1["rows_upserted"]) == (3, 5)
    assert (buffered_1["write_calls"], buffered_1["rows_upserted"]) == (1, 2)
    assert plain_2["write_calls"] == 1
    # The table now reads the last version; the one before it stays; older ones are gone; the first location, with
    # the rows the table held before, is left as it was.
    location = _location(spark, plain.name)
    assert location.startswith(first_location + ".versions/")
    versions = sorted(path.name for path in Path(first_location.removeprefix("file:") + ".versions").iterdir())
    assert len(versions) == 2 and location.rsplit("/", 1)[1] in versions
    assert sorted(map(tuple, spark.read.parquet(first_location).collect())) == [("legacy", 7, 70)]


def test_a_replayed_batch_finds_its_version_in_the_table_and_is_skipped(
    spark: SparkSession, db: str, views: Path, tmp_path: Path
) -> None:
    sink = _table_sink(spark, db, "replayed_views")
    add_views(views, "a", ("home", "u1", 120, "2026-01-01 00:00:01"), ("docs", "u2", 300, "2026-01-01 00:00:02"))
    checkpoint = tmp_path / "checkpoint"
    _run(spark, sink, checkpoint)
    lose_commit(checkpoint, 0)  # the driver died after the version, before the commit

    again = _run(spark, sink, checkpoint, T0 + 1000)

    assert (again["batches_already_written"], again["write_calls"]) == (1, 0)
    assert _rows(spark, sink.name) == _expected(spark)


def test_a_catalog_sink_cannot_take_a_memory_buffer(spark: SparkSession, db: str, views: Path, tmp_path: Path) -> None:
    sink = _table_sink(spark, db, "memory_views")
    add_views(views, "a", ("home", "u1", 120, "2026-01-01 00:00:01"))
    configuration = {"execution.flush.max-interval": "1 h", "execution.flush.memory-buffer-only": "true"}
    with pytest.raises(SpecError) as raised:
        _run(spark, sink, tmp_path / "checkpoint", **configuration)
    assert str(raised.value) == (
        f"sink {db}.memory_views: execution.flush.memory-buffer-only buffers in front of a PostgreSQL sink only (a "
        "catalog table takes a version per flush, a Kafka topic a message a key, from a micro-batch): leave it unset"
    )
    assert not spark.streams.active and not (tmp_path / "checkpoint").exists()


def test_a_writer_waits_for_another_s_switch_and_loses_none_of_its_rows(
    spark: SparkSession, db: str, views: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writers of one table at once: while another query holds the switch lock, this one waits; the other
    switches the table to a version of its own meanwhile; this one then builds on that version (no lost update) and
    does not remove it (it is the version before the last)."""
    sink = _table_sink(spark, db, "shared_views")
    first = _location(spark, sink.name).removeprefix("file:")
    versions = Path(first + ".versions")
    versions.mkdir()
    lock = versions / file_streams.SWITCH_LOCK
    lock.write_text('{"query": "the-other-query", "table": "x"}')
    waiting = threading.Event()
    holder = file_streams._lock_holder

    def seen(path: str) -> str | None:
        waiting.set()
        return holder(path)

    monkeypatch.setattr(file_streams, "_lock_holder", seen)
    monkeypatch.setattr(file_streams, "SWITCH_POLL_SECONDS", 0.01)
    add_views(views, "a", ("home", "u1", 120, "2026-01-01 00:00:01"))
    outcome: dict[str, Any] = {}
    writer = threading.Thread(target=lambda: outcome.update(_run(spark, sink, tmp_path / "checkpoint")))
    writer.start()
    assert waiting.wait(120), "the writer never met the other's lock"

    # The other writer, holding the lock: a version with a key of its own, switched to, then the lock released.
    others = versions / "the-other-query-0"
    spark.createDataFrame(
        [("legacy", 7, 70), ("other", 1, 10)], "page STRING, views BIGINT, total_ms BIGINT"
    ).write.parquet(str(others))
    spark.sql(f"ALTER TABLE {sink.name} SET LOCATION 'file:{others}'")
    lock.unlink()
    writer.join(300)

    assert not writer.is_alive() and outcome["write_calls"] == 1
    assert _rows(spark, sink.name) == sorted([("home", 1, 120), ("legacy", 7, 70), ("other", 1, 10)])
    assert others.exists(), "the version before the last stays"
    assert not lock.exists()


def test_a_switch_lock_another_query_never_releases_fails_in_one_line(tmp_path: Path) -> None:
    versions = tmp_path / "t.versions"
    versions.mkdir()
    (versions / file_streams.SWITCH_LOCK).write_text('{"query": "q-gone", "table": "db.t"}')

    with pytest.raises(JobError) as caught, file_streams.switch_lock(str(versions), "db.t", "q-mine", wait_seconds=0):
        pass

    assert str(caught.value) == (
        f"catalog sink db.t: another streaming query (q-gone) has held the table's switch lock for over 0 s: if it "
        f"has stopped, remove {versions}/{file_streams.SWITCH_LOCK}, then run again"
    )
    assert (versions / file_streams.SWITCH_LOCK).exists(), "another query's lock is never removed"


def test_a_query_takes_over_the_switch_lock_it_left(tmp_path: Path) -> None:
    versions = tmp_path / "t.versions"
    versions.mkdir()
    # its driver died holding it
    (versions / file_streams.SWITCH_LOCK).write_text('{"query": "q-mine", "table": "db.t"}')

    with file_streams.switch_lock(str(versions), "db.t", "q-mine", wait_seconds=0):
        held = (versions / file_streams.SWITCH_LOCK).exists()

    assert held and not (versions / file_streams.SWITCH_LOCK).exists()


def test_a_key_two_rows_of_a_batch_upsert_fails_the_batch_naming_it_before_anything_is_written(
    spark: SparkSession, db: str, views: Path, tmp_path: Path
) -> None:
    """The sink's key is part of the grouping columns: two groups of one batch share it, and neither row retracts the
    other (Spark's aggregation sends each changed group once): which to keep cannot be told."""
    spark.sql(f"CREATE TABLE {db}.per_user (page STRING, user STRING, views BIGINT) USING parquet")
    sink = TableUpsertSink(name=f"{db}.per_user", key=("page",))
    add_views(views, "a", ("home", "u1", 120, "2026-01-01 00:00:01"), ("home", "u2", 80, "2026-01-01 00:00:02"))
    before = _location(spark, sink.name)
    job = StreamingAggregationJob(
        query="SELECT page, user, count(*) AS views FROM STREAM(views) GROUP BY page, user",
        sink=sink,
        checkpoint=str(tmp_path / "checkpoint"),
    )

    with pytest.raises(JobError) as raised:
        run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0))

    assert (
        f"catalog sink {db}.per_user: two rows of one micro-batch upsert key (page) = (home) with other values, "
        "neither retracting the other: the sink's key must identify the query's rows (an aggregation's grouping "
        "columns)"
    ) in str(raised.value)
    assert "\n" not in str(raised.value), "one line"
    assert _location(spark, sink.name) == before and _rows(spark, sink.name) == [], "nothing was written"
