"""Cached tables inside a job, on a real session: what a miss writes, that a hit does not compute, and that a
damaged copy falls back to the definition."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from spark_tables.core.cache.descriptor import CacheDescriptor, descriptor_of_copy
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.job_spec import CacheUse
from spark_tables.core.sql.job import SqlJob
from spark_tables.jobs.cache import views
from spark_tables.jobs.cache.views import prepare_cached_views
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.entry import run_job

pytestmark = pytest.mark.spark

#: An expensive column (a SHA-256 per key) beside cheap ones, over 4 partitions of the computed result.
B = CachedTable(
    name="b",
    query="""SELECT k, count(*) AS n, max(sha2(CAST(id AS STRING), 256)) AS h
             FROM (SELECT id, id % 50 AS k FROM range(0, 2000, 1, 4)) GROUP BY k""",
)
#: The same name and a definition that fails if it is ever computed.
B_NEVER_COMPUTED = CachedTable(name="b", query="SELECT raise_error('b was computed') AS k")
OWNER = TableOwner(dag_id="flip36", run_id="manual__1", task_id="max_b", try_number=1)


@pytest.fixture(autouse=True)
def no_view_left(spark: SparkSession) -> Iterator[None]:
    """The session is shared: the views these tests make must not outlive them."""
    yield
    spark.catalog.dropTempView("b")


def prepare(spark: SparkSession, use: CacheUse) -> dict[str, Any]:
    reports: dict[str, dict[str, Any]] = {}
    prepare_cached_views(spark, (use,), Cancellation(), reports)
    return reports[use.table.name]


def written(table: CachedTable, report: dict[str, Any], at: str = "2026-11-22T10:00:00+00:00") -> CacheDescriptor:
    descriptor = descriptor_of_copy(table.name, table.fingerprint, report, OWNER, at)
    assert descriptor is not None
    return descriptor


def view_rows(spark: SparkSession, name: str = "b") -> list[tuple]:
    return sorted(tuple(row) for row in spark.table(name).collect())


@pytest.fixture
def first(spark: SparkSession, tmp_path: Path) -> tuple[CacheDescriptor, list[tuple]]:
    """A copy of b written by a miss, and b's rows."""
    report = prepare(spark, CacheUse(B, registered=(), location=str(tmp_path / "copy-1")))
    return written(B, report), view_rows(spark)


def part_files(descriptor: CacheDescriptor) -> list[Path]:
    return [Path(descriptor.location) / p.file for p in descriptor.partitions]


def test_a_miss_computes_writes_every_column_and_describes_each_partition(spark, tmp_path):
    report = prepare(spark, CacheUse(B, registered=(), location=str(tmp_path / "copy")))

    assert report["status"] == "miss" and report["damaged"] == [] and report["bytes_read"] == 0
    descriptor = written(B, report)
    expected = sorted(tuple(r) for r in spark.sql(B.query).collect())
    assert view_rows(spark) == expected, "the view reads the copy, with the definition's rows"
    assert descriptor.rows == 50 and len(descriptor.partitions) >= 1
    assert report["bytes_written"] == descriptor.bytes == sum(f.stat().st_size for f in part_files(descriptor))
    for partition, path in zip(descriptor.partitions, part_files(descriptor), strict=True):
        assert partition.crc32 == zlib.crc32(path.read_bytes())
        assert partition.rows == pq.ParquetFile(path).metadata.num_rows
    assert json.loads(descriptor.schema)["fields"][2]["name"] == "h"


def test_the_copy_holds_the_expensive_column_even_when_the_job_reads_only_a_cheap_one(spark, tmp_path):
    report = prepare(spark, CacheUse(B, registered=(), location=str(tmp_path / "copy")))
    spark.sql("SELECT max(k) FROM b").collect()  # a consumer that needs one cheap column

    for path in part_files(written(B, report)):
        assert pq.ParquetFile(path).schema_arrow.names == ["k", "n", "h"]
        assert all(len(h) == 64 for h in pq.read_table(path, columns=["h"]).column("h").to_pylist())


def test_a_hit_reads_the_registered_copy_and_never_computes_the_definition(spark, tmp_path, first):
    descriptor, rows = first
    use = CacheUse(B_NEVER_COMPUTED, registered=(descriptor,), location=str(tmp_path / "copy-2"))

    report = prepare(spark, use)

    assert report["status"] == "hit" and report["location"] == descriptor.location
    assert report["read_from"] == "files"  # the overview averages reads from files and from memory apart
    assert (report["bytes_read"], report["bytes_written"], report["damaged"]) == (descriptor.bytes, 0, [])
    assert "written" not in report and not (tmp_path / "copy-2").exists()
    assert view_rows(spark) == rows


def test_a_deleted_partition_falls_back_to_the_definition_and_writes_a_new_copy(spark, tmp_path, first):
    descriptor, rows = first
    lost = part_files(descriptor)[0]
    lost.unlink()

    report = prepare(spark, CacheUse(B, registered=(descriptor,), location=str(tmp_path / "copy-2")))

    assert report["status"] == "fallback"
    assert report["damaged"] == [{"location": descriptor.location, "problem": f"partition {lost.name} is missing"}]
    assert report["location"] == str(tmp_path / "copy-2") and written(B, report).rows == 50
    assert view_rows(spark) == rows, "the same result as before the loss"


def test_a_partition_changed_in_place_is_found_by_its_checksum(spark, tmp_path, first):
    descriptor, rows = first
    path = part_files(descriptor)[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped
    path.write_bytes(bytes(data))

    report = prepare(spark, CacheUse(B, registered=(descriptor,), location=str(tmp_path / "copy-2")))

    assert report["status"] == "fallback"
    # Where the file system keeps checksums of its own (Hadoop's local one does), it refuses the read first.
    problem = report["damaged"][0]["problem"]
    assert problem.startswith(f"partition {path.name} was changed (CRC-32") or (
        problem.startswith("its files cannot be read") and "FAILED_READ_FILE" in problem
    )
    assert view_rows(spark) == rows


def test_a_partition_changed_in_place_without_file_system_checksums_is_found_by_its_crc(spark, tmp_path, first):
    descriptor, rows = first
    path = part_files(descriptor)[0]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    (path.parent / f".{path.name}.crc").unlink()  # as on object stores, which keep no such side file

    report = prepare(spark, CacheUse(B, registered=(descriptor,), location=str(tmp_path / "copy-2")))

    assert report["damaged"][0]["problem"].startswith(f"partition {path.name} was changed (CRC-32")
    assert view_rows(spark) == rows


def test_a_copy_that_cannot_be_read_for_another_reason_is_kept_and_not_reported_damaged(
    spark, tmp_path, first, monkeypatch
):
    """A storage error proves nothing about a copy: the job computes the table, and the copy is left registered."""
    descriptor, rows = first

    checksums = views.file_checksums

    def storage_timeout(spark, location):
        if location == descriptor.location:
            raise TimeoutError("the object store did not answer")
        return checksums(spark, location)

    monkeypatch.setattr(views, "file_checksums", storage_timeout)
    report = prepare(spark, CacheUse(B, registered=(descriptor,), location=str(tmp_path / "copy-2")))

    assert report["status"] == "fallback" and report["damaged"] == []
    assert report["unchecked"] == [
        {
            "location": descriptor.location,
            "problem": "its files could not be read: TimeoutError: the object store did not answer",
        }
    ]
    assert all(path.exists() for path in part_files(descriptor)) and view_rows(spark) == rows


def test_a_copy_whose_folder_is_gone_falls_back(spark, tmp_path, first):
    descriptor, _ = first
    for path in Path(descriptor.location).iterdir():
        path.unlink()
    Path(descriptor.location).rmdir()

    report = prepare(spark, CacheUse(B, registered=(descriptor,), location=str(tmp_path / "copy-2")))

    assert report["damaged"] == [{"location": descriptor.location, "problem": "its folder is gone"}]


def test_the_oldest_whole_copy_is_read_and_damaged_ones_are_reported(spark, tmp_path, first):
    broken, rows = first
    part_files(broken)[0].unlink()
    whole = written(B, prepare(spark, CacheUse(B, registered=(), location=str(tmp_path / "copy-2"))))
    use = CacheUse(B_NEVER_COMPUTED, registered=(broken, whole), location=str(tmp_path / "copy-3"))

    report = prepare(spark, use)

    assert (report["status"], report["location"]) == ("hit", whole.location)
    assert [d["location"] for d in report["damaged"]] == [broken.location]
    assert view_rows(spark) == rows


def test_a_job_that_fails_after_writing_a_copy_still_reports_it(spark, tmp_path):
    use = CacheUse(B, registered=(), location=str(tmp_path / "copy"))
    job = SqlJob(statements=("SELECT max(h) FROM b", "SELECT * FROM no_such_table"))

    result = run_job(spark, job, Cancellation(), (use,))

    assert result.error is not None and "no_such_table" in result.error
    assert result.caches["b"]["status"] == "miss" and written(B, result.caches["b"]).rows == 50


def test_a_job_reads_a_cached_table_as_a_view(spark, tmp_path):
    use = CacheUse(B, registered=(), location=str(tmp_path / "copy"))
    job = SqlJob(statements=("SELECT count(*) AS keys, sum(n) AS rows FROM b",))

    result = run_job(spark, job, Cancellation(), (use,))

    assert result.error is None, result.error
    assert result.output.rows == [[50, 2000]]
    assert result.caches["b"]["status"] == "miss"


def test_an_empty_result_is_cached_and_read_back_empty_with_its_schema(spark, tmp_path):
    empty = CachedTable("b", query="SELECT id AS k, CAST(id AS STRING) AS h FROM range(10) WHERE id < 0")
    report = prepare(spark, CacheUse(empty, registered=(), location=str(tmp_path / "copy")))
    copy = written(empty, report)

    hit = prepare(spark, CacheUse(empty, registered=(copy,), location=str(tmp_path / "copy-2")))

    assert (copy.rows, hit["status"]) == (0, "hit")
    assert spark.table("b").count() == 0 and spark.table("b").columns == ["k", "h"]


def test_a_streaming_producer_fails_before_anything_is_written(spark, tmp_path, monkeypatch):
    """FLIP-36 makes cache() of a stream table a no-op; a cached table of a stream fails with one line instead."""
    (tmp_path / "stream_producers.py").write_text(
        "def ticks(spark):\n    return spark.readStream.format('rate').load()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    streaming = CachedTable("b", producer="stream_producers:ticks")
    use = CacheUse(streaming, registered=(), location=str(tmp_path / "copy"))

    result = run_job(spark, SqlJob(statements=("SELECT count(*) FROM b",)), Cancellation(), (use,))

    assert result.error == (
        "cache b: its producer stream_producers:ticks gives a streaming DataFrame, and streaming results cannot be "
        "cached: give a batch DataFrame (spark.read, not spark.readStream), or do not cache it"
    )
    assert not (tmp_path / "copy").exists() and spark.streams.active == []


def test_a_cached_table_whose_query_fails_names_the_cache_first(spark, tmp_path):
    broken = CachedTable("b", query="SELECT * FROM no_such_table")
    use = CacheUse(broken, registered=(), location=str(tmp_path / "copy"))

    result = run_job(spark, SqlJob(statements=("SELECT count(*) FROM b",)), Cancellation(), (use,))

    assert result.error.startswith(
        "cache b: [TABLE_OR_VIEW_NOT_FOUND] The table or view `no_such_table` cannot be found."
    ), result.error
    assert "\n" not in result.error and not (tmp_path / "copy").exists()
