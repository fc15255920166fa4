"""The durable buffer's log (``jobs/streaming/durable_buffer.py``) as data: a batch's changes go into the checkpoint as
Spark's Arrow rows and come back the same, every type a sink column takes; and a file in the log folder that is not
one of its logs (a pickle, which would run code when unpickled) is refused in one line, never read."""

from __future__ import annotations

import datetime
import pickle
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.errors import JobError
from spark_tables.core.streaming.flush import FlushOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.jobs.streaming.durable_buffer import DurableBuffer
from spark_tables.jobs.streaming.sinks.postgres_upsert import PostgresSinkWriter
from tests.spark.page_views import PG_SCHEMA, T0
from tests.spark.postgres import PG, run_sql

pytestmark = pytest.mark.spark

COLUMNS = "id int PRIMARY KEY, amount numeric(12, 3), at timestamp, day date, name text, flag boolean, raw bytea"
SCHEMA = (
    f"id INT, amount DECIMAL(12, 3), at TIMESTAMP, day DATE, name STRING, flag BOOLEAN, raw BINARY, {ROW_KIND} TINYINT"
)
AT = datetime.datetime(2026, 11, 28, 9, 30, 15, 123456)
ROWS = [
    (1, Decimal("1.500"), AT, datetime.date(2026, 11, 28), "one", True, b"\x00\x01", INSERT),
    (2, Decimal("2.250"), AT, datetime.date(2026, 11, 27), "two", False, b"\xff", INSERT),
    (1, Decimal("1.500"), AT, datetime.date(2026, 11, 28), "one", True, b"\x00\x01", UPDATE_BEFORE),
    (1, Decimal("-7.125"), None, None, None, None, None, UPDATE_AFTER),
    (3, Decimal("0.000"), AT, datetime.date(2026, 1, 1), "three", True, b"", INSERT),
    (3, Decimal("0.000"), AT, datetime.date(2026, 1, 1), "three", True, b"", DELETE),
]


def _buffer(checkpoint: Path) -> tuple[DurableBuffer, PostgresSinkWriter]:
    sink = PostgresUpsertSink(name="logged", conn_id="pg", table=f"{PG_SCHEMA}.logged", key=("id",))
    writer = PostgresSinkWriter(sink, dict(PG))
    options = FlushOptions.from_configuration({"execution.flush.max-interval": "1 h"})
    return DurableBuffer(writer, options, FixedClock(T0), str(checkpoint)), writer


def test_a_batch_s_changes_come_back_from_the_log_as_they_went_in(
    spark: SparkSession, views: Path, tmp_path: Path
) -> None:
    run_sql(f"CREATE TABLE {PG_SCHEMA}.logged ({COLUMNS})")
    frame = spark.createDataFrame(ROWS, SCHEMA)
    first, writer = _buffer(tmp_path / "checkpoint")
    first.prepare(frame, str(tmp_path / "checkpoint"))
    first._keep(7, writer.last_change_rows(frame))
    assert [path.name for path in (tmp_path / "checkpoint-buffer-log").iterdir()] == [f"{7:020d}.arrow"]

    after, _ = _buffer(tmp_path / "checkpoint")
    after.prepare(frame, str(tmp_path / "checkpoint"))  # a run that finds the log reads it back

    at = AT.astimezone(datetime.UTC)  # Spark's Arrow timestamps: instants in UTC, AT read in the session's zone
    assert (
        after.entries
        == writer.last_changes(frame)
        == {
            (1,): (1, Decimal("-7.125"), None, None, None, None, None),
            (2,): (2, Decimal("2.250"), at, datetime.date(2026, 11, 27), "two", False, b"\xff"),
            (3,): None,
        }
    )
    assert list(after.entries) == [(1,), (2,), (3,)], "in the batch's order"


class _Planted:
    """What a file someone else put in the log folder could hold: unpickling it writes ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return (Path.write_text, (self.path, "ran"))


def test_a_file_that_is_no_log_of_the_buffer_is_refused_in_one_line_and_never_read(
    spark: SparkSession, views: Path, tmp_path: Path
) -> None:
    run_sql(f"CREATE TABLE {PG_SCHEMA}.logged ({COLUMNS})")
    log_folder = tmp_path / "checkpoint-buffer-log"
    log_folder.mkdir()
    ran = tmp_path / "ran"
    (log_folder / f"{3:020d}.pickle").write_bytes(pickle.dumps(_Planted(ran)))
    buffer, _ = _buffer(tmp_path / "checkpoint")

    with pytest.raises(JobError) as raised:
        buffer.prepare(spark.createDataFrame(ROWS, SCHEMA), str(tmp_path / "checkpoint"))

    assert str(raised.value) == (
        f"durable buffer of sink logged: {log_folder}/{3:020d}.pickle is not one of its log files (<batch id>.arrow), "
        "and is not read: move it out of that folder, then run again"
    )
    assert not ran.exists() and buffer.entries == {}
