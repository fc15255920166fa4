"""What a streaming query's sink does with a table of Spark's file formats (parquet, orc, json, csv): a folder of
files with no log of commits, so the sink keeps its own record of the batches it wrote.

Appends: Spark's own file sink (``DataStreamWriter.toTable``) is not used: once it has written into a table's folder,
the table reads only the files its ``_spark_metadata`` log lists, so the rows the table held before, and any a batch
``INSERT`` adds later, vanish from it. Instead a batch is written to a hidden folder in the table's location
(``_spark_tables_<query id>-<batch id>``: readers skip names starting with ``_``), its files are moved in under names
carrying the query's and the batch's ids, and then a mark for the batch is written in the checkpoint
(``batch_marks``). A batch whose mark exists is in the table; one whose staging folder is still there stopped part
way, so the files it moved in are deleted by their names and the batch is written again.

Upserts by key: a file table cannot update rows in place, so each batch that changes anything writes a new version
of the table (its rows whose keys the batch did not change, and each key's last change but deletes) into its own
folder, ``<the table's first location>.versions/<query id>-<batch id>``, and ``ALTER TABLE ... SET LOCATION``
switches the table to it: one catalog operation, so a reader sees the version before or after, never a mix. The
version before stays (a reader may still be listing it); older versions the sink wrote are deleted; the table's
first location, with the rows it held before, is left as it was. A batch that finds the table on its own version is
in the table; one that stopped before the switch writes its version again. A buffered query flushes in
micro-batches, so buffering costs one version per flush instead of one per batch.

Only unpartitioned file tables take either; others fail before the query starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.errors import JobError, SpecError, one_line
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.jobs import files
from spark_tables.jobs.changelog import quoted
from spark_tables.jobs.table_format import catalog
from spark_tables.jobs.table_format.batch_marks import BatchMarks
from spark_tables.jobs.table_format.tables import DELETED, BatchWrite

log = logging.getLogger(__name__)

#: Catalog table formats whose tables are folders of files that Spark writes by path.
FILE_FORMATS = ("parquet", "orc", "json", "csv")
#: The suffix of the folder beside a keyed catalog table's first location that holds the versions its sink writes.
VERSIONS = ".versions"


@dataclass(frozen=True)
class FileSinkTable:
    """An unpartitioned file table of the catalog, as a streaming query's sink writes it (``SinkTable``)."""

    name: str
    columns: list[str]
    format: str
    options: dict[str, str]
    location: str
    marks: BatchMarks

    def append(self, spark: SparkSession, batch: DataFrame, *, query_id: str, batch_id: int) -> BatchWrite | None:
        if self.marks.holds(batch_id):
            return None
        # The names tie each file to this query (stable across restarts from its checkpoint) and batch.
        moved_prefix = f"part-{query_id}-{batch_id}-"
        staging = f"{self.location}/_spark_tables_{query_id}-{batch_id}"
        if files.exists(staging):
            removed = files.remove_named(self.location, moved_prefix)
            log.warning("catalog sink %s: batch %d stopped part way; %d file(s) removed", self.name, batch_id, removed)
        observation = Observation()
        rows = batch.select(*map(quoted, self.columns)).observe(observation, F.count(F.lit(1)).alias("rows"))
        rows.write.format(self.format).options(**self.options).mode("overwrite").save(staging)
        appended = observation.get["rows"]
        moved = files.data_file_names(staging) if appended else []
        for name in moved:
            files.move(f"{staging}/{name}", f"{self.location}/{moved_prefix}{name.removeprefix('part-')}")
        self.marks.record(batch_id)
        files.remove(staging)
        # The session that started the query lists the table's files again.
        spark.catalog.refreshTable(self.name)
        return BatchWrite(committed=bool(appended), rows_appended=appended, files_written=len(moved))

    def upsert(
        self, spark: SparkSession, changes: DataFrame, key: Sequence[str], *, query_id: str, batch_id: int
    ) -> BatchWrite | None:
        seen = describe_table(spark, self.name)["location"].rstrip("/")
        first = seen.split(VERSIONS + "/")[0] if VERSIONS + "/" in seen else seen
        with switch_lock(f"{first}{VERSIONS}", self.name, query_id):
            return self._write_version(spark, changes, key, f"{first}{VERSIONS}", f"{query_id}-{batch_id}")

    def _write_version(
        self, spark: SparkSession, changes: DataFrame, key: Sequence[str], versions: str, name: str
    ) -> BatchWrite | None:
        """Under the table's switch lock: the version ``name`` made from the table's current rows and ``changes``,
        switched to, and the versions before the last removed; another writer of the table waits, so no write is lost
        and no version that is current is removed."""
        current = describe_table(spark, self.name)["location"].rstrip("/")
        version = f"{versions}/{name}"
        if current == version:
            return None
        changes = changes.persist()  # computed once, for its counts and the version
        try:
            metrics = changes.agg(
                F.count(F.lit(1)).alias("changes"),
                F.coalesce(F.sum(F.col(DELETED).cast("long")), F.lit(0)).alias("deletes"),
            ).first()
            if not metrics["changes"]:
                return BatchWrite()
            quoted_name = TableIdentifier.parse(self.name).quoted()
            kept = spark.table(quoted_name).join(changes.select(*map(quoted, key)), list(key), "left_anti")
            upserts = changes.where(~F.col(DELETED)).select(*map(quoted, self.columns))
            rows = kept.select(*map(quoted, self.columns)).unionByName(upserts)
            rows.write.format(self.format).options(**self.options).mode("overwrite").save(version)
        finally:
            changes.unpersist()
        location = version.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"ALTER TABLE {quoted_name} SET LOCATION '{location}'")
        spark.catalog.refreshTable(self.name)
        _remove_older(versions, keep={version, current})
        upserted, deleted = metrics["changes"] - metrics["deletes"], metrics["deletes"]
        log.info(
            "catalog sink %s: upserted %d row(s), deleted %d key(s): version %s", self.name, upserted, deleted, version
        )
        return BatchWrite(
            committed=True,
            rows_upserted=upserted,
            rows_deleted=deleted,
            files_written=len(files.data_file_names(version)),
        )


def file_sink_table(spark: SparkSession, name: str, frame: DataFrame, checkpoint: str, *, writes: str) -> FileSinkTable:
    """Catalog table ``name``, checked to be an unpartitioned file table with ``frame``'s columns and types;
    ``SpecError`` when not, ``writes`` saying what the sink does."""
    table = describe_table(spark, name)
    if table.get("type") == "VIEW":
        raise SpecError(f"catalog sink {name} is a view: write into a table")
    if table.get("provider") not in FILE_FORMATS or not table.get("location"):
        raise SpecError(
            f"catalog sink {name} is a {table.get('provider')} table: {writes} to tables "
            f"USING {' | '.join(FILE_FORMATS)}"
        )
    if table.get("partition_columns"):
        raise SpecError(
            f"catalog sink {name} is partitioned by {', '.join(table['partition_columns'])}: {writes} "
            "to unpartitioned tables only"
        )
    return FileSinkTable(
        name=name,
        columns=catalog.sink_columns(spark, name, frame),
        format=table["provider"],
        options={key: value for key, value in table.get("storage_properties", {}).items() if key != "path"},
        location=table["location"].rstrip("/"),
        marks=BatchMarks.of(checkpoint),
    )


def describe_table(spark: SparkSession, name: str) -> dict[str, Any]:
    try:
        row = spark.sql(f"DESCRIBE TABLE EXTENDED {TableIdentifier.parse(name).quoted()} AS JSON").first()
    except AnalysisException as err:
        raise SpecError(f"catalog sink {name}: {one_line(err)}") from None
    return json.loads(row[0])


def _remove_older(versions: str, keep: set[str]) -> None:
    """Delete the versions this sink wrote into ``versions`` but those in ``keep``."""
    for name in files.folder_names(versions):
        if f"{versions}/{name}" not in keep:
            files.remove(f"{versions}/{name}")


#: Seconds a keyed catalog sink waits for another writer of its table to switch it, and between two looks.
SWITCH_WAIT_SECONDS = 600.0
SWITCH_POLL_SECONDS = 0.5
#: In a keyed catalog table's versions folder: the writer switching the table now (created exclusively).
SWITCH_LOCK = "_switch.lock"


@contextlib.contextmanager
def switch_lock(versions: str, table: str, query_id: str, wait_seconds: float = SWITCH_WAIT_SECONDS) -> Iterator[None]:
    """Hold the lock of switching catalog table ``table`` to a new version: a file in its versions folder, created
    exclusively (``files.create_exclusive``), naming the query. The same query (restarted from its checkpoint) takes
    over a lock it left; another waits ``wait_seconds`` at most, then fails in one line naming the lock's file."""
    lock = f"{versions}/{SWITCH_LOCK}"
    deadline = time.monotonic() + wait_seconds
    while not files.create_exclusive(lock, json.dumps({"query": query_id, "table": table}).encode()):
        holder = _lock_holder(lock)
        if holder == query_id:
            log.warning("catalog sink %s: taking over the switch lock this query left (%s)", table, lock)
            break
        if time.monotonic() >= deadline:
            raise JobError(
                f"catalog sink {table}: another streaming query ({holder}) has held the table's switch lock for "
                f"over {wait_seconds:.0f} s: if it has stopped, remove {lock}, then run again"
            )
        time.sleep(SWITCH_POLL_SECONDS)
    try:
        yield
    finally:
        files.remove(lock)


def _lock_holder(lock: str) -> str | None:
    try:
        return str(json.loads(files.read_text(lock)).get("query"))
    except (FileNotFoundError, ValueError, AttributeError):
        return None  # released meanwhile, or being written: look again
