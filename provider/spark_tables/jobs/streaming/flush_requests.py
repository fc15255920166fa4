"""Flush requests: how the runner tells every bucket of a buffer to flush now (FLIP-365's
``notifyNothingAvailable`` and end of input).

Spark runs a micro-batch only when a source has new data (no-data batches are off, see ``state_ttl``), and a
timer fires only in a batch, so a flush that must happen when the input is idle, or when it has ended, needs a
row: a request is a JSON file of one row per bucket (its number and the cause), written with Spark's own writer
into a folder that the query reads as a second source. The file source's log makes each request count once, and
the batch that reads it flushes and commits the buffer's state together.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.errors import SpecError
from spark_tables.jobs.streaming.buffer import BUCKET, BUCKETS, CAUSES, FLUSH_CAUSE

SCHEMA = f"{BUCKET} INT, {FLUSH_CAUSE} STRING"


def prepare_requests(spark: SparkSession, folder: str) -> None:
    """Create ``folder`` (a file stream's folder must exist when its query starts) with no request in it."""
    spark.createDataFrame([], SCHEMA).write.mode("append").json(folder)


def flush_requests(spark: SparkSession, folder: str) -> DataFrame:
    """The stream of the flush requests written into ``folder``."""
    return spark.readStream.schema(SCHEMA).json(folder)


def request_flush(spark: SparkSession, folder: str, cause: str) -> None:
    """Ask every bucket to flush at the next micro-batch."""
    if cause not in CAUSES or cause == "interval":
        raise SpecError(f"flush request cause {cause!r} is invalid: use idle or end")
    rows = [(bucket, cause) for bucket in range(BUCKETS)]
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.mode("append").json(folder)
