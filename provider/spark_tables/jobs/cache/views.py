"""Cached tables inside a job: each becomes a temporary view before the job's own work starts.

The view reads the oldest registered copy that is whole: every partition present with its registered size and
CRC-32 (FLIP-36's cache source), or, for a copy kept in a Spark Connect server's memory, still cached by the
application that cached it. If there is none (a miss), or every copy is damaged (a fallback), the table is
computed from its definition and kept whole (the FLIP's cache sink: every column, as declared, so no later query can
prune the expensive ones away): written to the job's copy folder and described partition by partition, or cached in
the server's memory (``jobs.cache.memory``); the view reads that copy. The Airflow side registers what was kept once
the job ends.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_tables.core.cache.descriptor import COPY_FORMAT, CacheDescriptor, CachePartition
from spark_tables.core.cache.layout import memory_parts
from spark_tables.core.cache.table import MEMORY
from spark_tables.core.errors import JobError, one_line
from spark_tables.core.job_spec import CacheUse
from spark_tables.jobs import files
from spark_tables.jobs.cache.memory import keep_in_memory, memory_problem
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.failures import failures_named
from spark_tables.jobs.row_frames import rows

log = logging.getLogger(__name__)

#: The files of a copy: Spark's part files (not _SUCCESS, checksum side files or markers).
_PART_FILES = "part-*"


def prepare_cached_views(
    spark: SparkSession, uses: tuple[CacheUse, ...], cancellation: Cancellation, reports: dict[str, dict[str, Any]]
) -> None:
    """Make each cached table a view; ``reports`` gets, by name, what was read, written and found damaged.

    ``reports`` is filled as each table is ready, so what was written is known even if a later one fails.
    """
    for use in uses:
        cancellation.check()
        reports[use.table.name] = _prepare(spark, use, cancellation)


def _prepare(spark: SparkSession, use: CacheUse, cancellation: Cancellation) -> dict[str, Any]:
    started, name = time.monotonic(), use.table.name
    damaged: list[dict[str, Any]] = []
    unchecked: list[dict[str, Any]] = []
    for descriptor in use.registered:
        try:
            problem = memory_problem(spark, descriptor) if descriptor.in_memory else damage(spark, descriptor)
        except CopyNotChecked as err:
            cancellation.check()
            log.warning(
                "cache %s: the copy at %s could not be checked (%s): computing the table instead; the copy is kept",
                name,
                descriptor.location,
                err,
            )
            unchecked.append({"location": descriptor.location, "problem": str(err)})
            continue
        cancellation.check()  # an interrupted check proves nothing about the copy
        if problem is None:
            if descriptor.in_memory:
                _read_memory_as_view(spark, name, descriptor.location)
            else:
                _read_as_view(spark, name, descriptor.location, descriptor.schema, descriptor.partitions)
            log.info("cache %s: hit, reading the copy %s", name, descriptor.describe())
            report = _report("hit", descriptor.location, started, damaged, unchecked, bytes_read=descriptor.bytes)
            return {**report, "read_from": descriptor.storage}
        log.warning("cache %s: the copy at %s is damaged (%s): falling back", name, descriptor.location, problem)
        damaged.append({"location": descriptor.location, "problem": problem})
    status = "fallback" if damaged or unchecked else "miss"
    keeping = "caching it in the server's memory as" if use.storage == MEMORY else "writing a copy to"
    log.info("cache %s: %s, computing it and %s %s", name, status, keeping, use.location)
    with failures_named(f"cache {name}"):  # the task's error says which cached table failed
        frame = rows(spark, use.table.query, use.table.producer)
    if frame.isStreaming:  # FLIP-36 makes cache() of a stream table a no-op; here it would fail at the write
        definition = f"producer {use.table.producer}" if use.table.producer else "query"
        raise JobError(
            f"cache {name}: its {definition} gives a streaming DataFrame, and streaming results cannot be cached: "
            "give a batch DataFrame (spark.read, not spark.readStream), or do not cache it"
        )
    cancellation.check()
    if use.storage == MEMORY:
        with failures_named(f"cache {name}"):
            location, row_count, held = keep_in_memory(spark, frame, use.location)
        _read_memory_as_view(spark, name, location)
        log.info("cache %s: cached %d rows, %d bytes in the server's memory at %s", name, row_count, held, location)
        report = _report(status, location, started, damaged, unchecked, bytes_written=held)
        written = {"storage": MEMORY, "schema": frame.schema.json(), "rows": row_count, "bytes": held}
        return {**report, "written": written}
    with failures_named(f"cache {name}"):
        schema, partitions = write_copy(spark, frame, use.location)
    _read_as_view(spark, name, use.location, schema, partitions)
    written, row_count = sum(p.bytes for p in partitions), sum(p.rows for p in partitions)
    log.info("cache %s: wrote %d rows, %d bytes in %d partitions", name, row_count, written, len(partitions))
    report = _report(status, use.location, started, damaged, unchecked, bytes_written=written)
    return {**report, "written": {"schema": schema, "partitions": [vars(p) for p in partitions]}}


def _report(
    status: str,
    location: str,
    started: float,
    damaged: list[dict[str, Any]],
    unchecked: list[dict[str, Any]],
    *,
    bytes_read: int = 0,
    bytes_written: int = 0,
) -> dict[str, Any]:
    """``damaged``: copies proven unusable, which the task unregisters (their files go); ``unchecked``: copies that
    could not be checked, left as they are."""
    return {
        "status": status,
        "location": location,
        "damaged": damaged,
        "unchecked": unchecked,
        "bytes_read": bytes_read,
        "bytes_written": bytes_written,
        "seconds": round(time.monotonic() - started, 3),
    }


def write_copy(spark: SparkSession, frame: DataFrame, location: str) -> tuple[str, tuple[CachePartition, ...]]:
    """Write every column and row of ``frame`` under ``location``; its schema (JSON) and partitions, described."""
    frame.write.mode("error").format(COPY_FORMAT).save(location)  # "errorifexists" is refused over Spark Connect
    row_counts = {
        row[0]: row[1]
        for row in spark.read.format(COPY_FORMAT).load(location).groupBy(F.col("_metadata.file_name")).count().collect()
    }
    partitions = tuple(
        CachePartition(file=file, rows=row_counts.get(file, 0), bytes=size, crc32=crc)
        for file, (size, crc) in sorted(file_checksums(spark, location).items())
    )
    return frame.schema.json(), partitions


def file_checksums(spark: SparkSession, location: str) -> dict[str, tuple[int, int]]:
    """Size and CRC-32 of every part file under ``location``, computed by the executors."""
    files = (
        spark.read.format("binaryFile")
        .option("pathGlobFilter", _PART_FILES)
        .load(location)
        .select(F.element_at(F.split("path", "/"), -1), "length", F.crc32("content"))
        .collect()
    )
    return {file: (size, crc) for file, size, crc in files}


class CopyNotChecked(Exception):
    """A registered copy could not be checked (a storage error): nothing is proven about it, so it is kept."""


def damage(spark: SparkSession, descriptor: CacheDescriptor) -> str | None:
    """What proves a registered copy unusable, in one line naming the file: its folder gone, a partition missing,
    resized or changed; None if it is whole. ``CopyNotChecked`` if it cannot be checked: a storage error proves
    nothing (only a proof may unregister a copy, whose files then go)."""
    try:
        problem = _missing_or_resized(descriptor)
    except Exception as err:
        raise CopyNotChecked(f"its files could not be listed: {one_line(err)}") from err
    if problem is not None:
        return problem
    try:
        found = file_checksums(spark, descriptor.location)
    except Exception as err:
        # The executors could not read the copy. What the driver finds is proof: a partition deleted since the
        # listing, or one changed in place (a file system that keeps checksums of its own, as Hadoop's local one
        # does, refuses to read it). Anything else proves nothing.
        folder = descriptor.location.rstrip("/")
        with contextlib.suppress(Exception):
            problem = _missing_or_resized(descriptor) or _changed(descriptor, lambda f: files.crc32(f"{folder}/{f}"))
        if problem is not None:
            return problem
        raise CopyNotChecked(f"its files could not be read: {one_line(err)}") from err
    return _changed(descriptor, lambda file: found[file][1] if file in found else None)


def _changed(descriptor: CacheDescriptor, crc_of: Callable[[str], int | None]) -> str | None:
    """The first partition file whose CRC-32 (``crc_of`` it; None: the file is not there) is not the registered one."""
    for partition in descriptor.partitions:
        crc = crc_of(partition.file)
        if crc is None:
            return f"partition {partition.file} is missing"
        if crc != partition.crc32:
            return f"partition {partition.file} was changed (CRC-32 {crc}, {partition.crc32} was written)"
    return None


def _missing_or_resized(descriptor: CacheDescriptor) -> str | None:
    """The first partition file that is not there with its registered size, from a listing of the copy's folder."""
    sizes = files.file_sizes(descriptor.location)
    if sizes is None:
        return "its folder is gone"
    for partition in descriptor.partitions:
        if partition.file not in sizes:
            return f"partition {partition.file} is missing"
        if sizes[partition.file] != partition.bytes:
            return f"partition {partition.file} has {sizes[partition.file]} bytes, {partition.bytes} were written"
    return None


def _read_as_view(
    spark: SparkSession, name: str, location: str, schema: str, partitions: tuple[CachePartition, ...]
) -> None:
    """The view reads exactly the copy's partitions, with its schema as written (no files listed or inferred)."""
    files = [f"{location.rstrip('/')}/{p.file}" for p in partitions]
    reader = spark.read.format(COPY_FORMAT).schema(StructType.fromJson(json.loads(schema)))
    reader.load(files).createOrReplaceTempView(name)


def _read_memory_as_view(spark: SparkSession, name: str, location: str) -> None:
    """The view reads the cached global temporary view a copy kept in memory is."""
    spark.table(memory_parts(location)[1]).createOrReplaceTempView(name)
