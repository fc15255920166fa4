"""What a streaming query's sink does with a Delta Lake table, through Delta's own writer and SQL (the same under
spark-submit and over Spark Connect).

Appends: each batch is one Delta append carrying the query's id and the batch's id as Delta's idempotent-write
options (``txnAppId``, ``txnVersion``): Delta records them in the commit, and skips a batch whose id it recorded
for the query already (one Spark runs again after its commit, before the checkpoint's), writing nothing.

Upserts by key: each batch's changes, one per key, are one ``MERGE INTO``: a delete deletes the key's row, any
other change updates it or inserts it. Delta's idempotent DML takes its ids from session confs, which the queries of
a session share (in session mode, foreachBatch runs on the job's session), so another query's MERGE could take this
one's ids and be skipped; instead the batch's mark in the checkpoint (``batch_marks``) says it was written, and a
batch run again between its commit and its mark merges the same last change per key again, which leaves the same
rows (Spark runs only the last batch again, so no later change is undone).

Read as a stream: a table with Delta's change data feed (``delta.enableChangeDataFeed``) is read as its changes,
which may update and delete (its current rows first, as inserts, then every commit's inserts, updates as -U and +U,
deletes as -D); another, as its appends (Delta's streaming reader then fails on a commit that updates or deletes,
naming it).

Commits and files written come from the commit's metrics in the table's log (``delta_log``), found by the batch's
ids (an append) or by its operation and row counts (a MERGE), never from a scan.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType

from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.jobs.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE, insert_only, quoted
from spark_tables.jobs.table_format import catalog, delta_log
from spark_tables.jobs.table_format.batch_marks import BatchMarks
from spark_tables.jobs.table_format.tables import DELETED, BatchWrite, StreamedTable

log = logging.getLogger(__name__)

#: The table property that keeps a Delta table's change data feed.
CHANGE_FEED = "delta.enableChangeDataFeed"
#: Delta's kinds of change (``_change_type``), as Flink's row kinds.
_ROW_KINDS = {"insert": INSERT, "update_preimage": UPDATE_BEFORE, "update_postimage": UPDATE_AFTER, "delete": DELETE}
#: A MERGE commit's metrics of the rows it inserted, updated and deleted, which its result row gives too.
_MERGED_ROWS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
#: The columns Delta adds to a change data feed's rows.
_FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


@dataclass(frozen=True)
class DeltaSinkTable:
    """A Delta table of the catalog, as a streaming query's sink writes it (``SinkTable``); partitioned or not."""

    name: str
    columns: list[str]
    location: str
    marks: BatchMarks

    def append(self, spark: SparkSession, batch: DataFrame, *, query_id: str, batch_id: int) -> BatchWrite | None:
        before = delta_log.newest_version(self.location)
        (
            batch.select(*map(quoted, self.columns))
            .write.format("delta")
            .option("txnAppId", query_id)
            .option("txnVersion", batch_id)
            .mode("append")
            .saveAsTable(TableIdentifier.parse(self.name).quoted())
        )
        made = next(
            (
                commit
                for commit in delta_log.commits_after(self.location, before)
                if any((txn.get("appId"), txn.get("version")) == (query_id, batch_id) for txn in commit.transactions)
            ),
            None,
        )
        if made is None:  # Delta skipped it: the table has this batch
            return None
        appended = made.count("numOutputRows") or 0
        log.info("catalog sink %s: appended %d row(s) in version %d", self.name, appended, made.version)
        return BatchWrite(committed=True, rows_appended=appended, files_written=made.count("numFiles") or 0)

    def upsert(
        self, spark: SparkSession, changes: DataFrame, key: Sequence[str], *, query_id: str, batch_id: int
    ) -> BatchWrite | None:
        if self.marks.holds(batch_id):
            return None
        session = changes.sparkSession  # the one its temporary view is visible in
        changes = changes.persist()  # computed once, for its counts and the merge
        view = f"spark_tables_changes_{uuid.uuid4().hex}"
        try:
            counted = changes.agg(
                F.count(F.lit(1)).alias("changes"),
                F.coalesce(F.sum(F.col(DELETED).cast("long")), F.lit(0)).alias("deletes"),
            ).first()
            merged = None
            if counted["changes"]:
                before = delta_log.newest_version(self.location)
                changes.createOrReplaceTempView(view)
                merged = session.sql(self._merge(view, key)).first()
        finally:
            session.catalog.dropTempView(view)
            changes.unpersist()
        self.marks.record(batch_id)
        if merged is None:
            return BatchWrite()
        rows = (merged["num_inserted_rows"], merged["num_updated_rows"], merged["num_deleted_rows"])
        made = next(
            (
                commit
                for commit in delta_log.commits_after(self.location, before)
                if commit.operation == "MERGE" and tuple(map(commit.count, _MERGED_ROWS)) == rows
            ),
            None,
        )
        upserted, deleted = counted["changes"] - counted["deletes"], counted["deletes"]
        log.info(
            "catalog sink %s: merged %d upsert(s) and %d delete(s) in version %s",
            self.name,
            upserted,
            deleted,
            made.version if made is not None else "unknown",
        )
        return BatchWrite(
            committed=True,
            rows_upserted=upserted,
            rows_deleted=deleted,
            files_written=(made.count("numTargetFilesAdded") or 0) if made is not None else 0,
        )

    def _merge(self, view: str, key: Sequence[str]) -> str:
        def column(side: str, name: str) -> str:
            return f"{side}.{quote_part(name)}"

        on = " AND ".join(f"{column('t', name)} <=> {column('c', name)}" for name in key)
        deleted = column("c", DELETED)
        names = ", ".join(map(quote_part, self.columns))
        values = ", ".join(column("c", name) for name in self.columns)
        updates = ", ".join(f"{column('t', name)} = {column('c', name)}" for name in self.columns if name not in key)
        update = f"WHEN MATCHED THEN UPDATE SET {updates} " if updates else ""
        return (
            f"MERGE INTO {TableIdentifier.parse(self.name).quoted()} AS t USING {view} AS c ON {on} "
            f"WHEN MATCHED AND {deleted} THEN DELETE {update}"
            f"WHEN NOT MATCHED AND NOT {deleted} THEN INSERT ({names}) VALUES ({values})"
        )


def delta_sink_table(spark: SparkSession, name: str, frame: DataFrame, checkpoint: str) -> DeltaSinkTable:
    """Delta table ``name``, checked to have ``frame``'s columns and types; ``SpecError`` when not."""
    location = (catalog.details(spark, TableIdentifier.parse(name)) or {}).get("Location", "")
    return DeltaSinkTable(
        name=name,
        columns=catalog.sink_columns(spark, name, frame),
        location=location.rstrip("/"),
        marks=BatchMarks.of(checkpoint),
    )


def delta_stream(spark: SparkSession, name: str) -> StreamedTable:
    """Delta table ``name`` as a stream: its change data feed where the table keeps one, else its appends."""
    quoted_name = TableIdentifier.parse(name).quoted()
    properties = catalog.properties(spark, TableIdentifier.parse(name)) or {}
    if properties.get(CHANGE_FEED, "false").lower() != "true":
        return StreamedTable(insert_only(spark.readStream.format("delta").table(quoted_name)), True)
    feed = spark.readStream.format("delta").option("readChangeFeed", "true").table(quoted_name)
    kind = F.lit(None).cast(ByteType())
    for change, row_kind in _ROW_KINDS.items():
        kind = F.when(F.col("_change_type") == change, F.lit(row_kind).cast(ByteType())).otherwise(kind)
    return StreamedTable(feed.withColumn(ROW_KIND, kind).drop(*_FEED_COLUMNS), False)
