"""A catalog table kept by key (``TableUpsertSink``) takes updating streams: a file table cannot update rows in place,
so each batch that changes anything writes a new version of the table (its rows whose keys the batch did not
change, and each key's last change but deletes and -U) into its own folder,
``<the table's first location>.versions/<query id>-<batch id>``, and ``ALTER TABLE ... SET LOCATION`` switches
the table to it: one catalog operation, so a reader sees the version before or after, never a mix. The version
before stays (a reader may still be listing it); older versions the sink wrote are deleted; the table's first
location, with the rows it held before, is left as it was. A replayed batch finds the table on its own version
and is skipped; one that stopped before the switch writes its version again. A buffered query flushes in
micro-batches, so buffering costs one version per flush instead of one per batch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark_tables.core.errors import JobError, SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.streaming.sinks import TableUpsertSink
from spark_tables.jobs import files
from spark_tables.jobs.streaming.changelog import DELETE, EMIT_ORDER, ROW_KIND, UPDATE_BEFORE, quoted
from spark_tables.jobs.streaming.sinks.catalog_table import describe_table, file_table
from spark_tables.jobs.streaming.sinks.writer import BATCH_ORDER, SinkWriter

log = logging.getLogger(__name__)

#: The suffix of the folder beside a keyed catalog table's first location that holds the versions its sink writes.
VERSIONS = ".versions"


class TableUpsertSinkWriter(SinkWriter):
    """Keeps an unpartitioned file table of the catalog equal to an updating stream, by key, a version per batch."""

    sink: TableUpsertSink

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        spark = frame.sparkSession
        table = file_table(spark, self.sink.name, frame, "an upsert sink writes")
        missing_key = [column for column in self.sink.key if column not in table.columns]
        if missing_key:
            raise SpecError(f"catalog sink {self.sink.name}: the query gives no key column {', '.join(missing_key)}")
        self.columns, self._format, self._options = table.columns, table.format, table.options
        self._quoted = TableIdentifier.parse(self.sink.name).quoted()
        self._spark = spark

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        spark = self.session(batch)
        seen = describe_table(spark, self.sink.name)["location"].rstrip("/")
        first = seen.split(VERSIONS + "/")[0] if VERSIONS + "/" in seen else seen
        with switch_lock(f"{first}{VERSIONS}", self.sink.name, self.query_id()):
            self._write_version(spark, batch, batch_id, first)

    def _write_version(self, spark: SparkSession, batch: DataFrame, batch_id: int, first: str) -> None:
        """Under the table's switch lock: the version of the batch made from the table's current rows, switched to,
        and the versions before the last removed; another writer of the table waits, so no write is lost and no
        version that is current is removed."""
        current = describe_table(spark, self.sink.name)["location"].rstrip("/")
        version = f"{first}{VERSIONS}/{self.query_id()}-{batch_id}"
        if current == version:
            self._skip(batch, batch_id)
            return
        changes = self._last_changes(batch).persist()  # the batch is computed once, for its counts and its version
        try:
            metrics = changes.agg(
                F.count(F.lit(1)).alias("changes"),
                F.coalesce(F.sum(F.when(F.col(ROW_KIND) == DELETE, 1).otherwise(0)), F.lit(0)).alias("deletes"),
            ).first()
            if not metrics["changes"]:
                return
            key = list(self.sink.key)
            kept = spark.table(self._quoted).join(changes.select(*map(quoted, key)), key, "left_anti")
            upserts = changes.where(F.col(ROW_KIND) != DELETE).select(*map(quoted, self.columns))
            rows = kept.select(*map(quoted, self.columns)).unionByName(upserts)
            rows.write.format(self._format).options(**self._options).mode("overwrite").save(version)
        finally:
            changes.unpersist()
        location = version.replace("\\", "\\\\").replace("'", "\\'")
        spark.sql(f"ALTER TABLE {self._quoted} SET LOCATION '{location}'")
        spark.catalog.refreshTable(self.sink.name)
        self._remove_older(f"{first}{VERSIONS}", keep={version, current})
        self.counts.write_calls += 1
        self.counts.rows_upserted += metrics["changes"] - metrics["deletes"]
        self.counts.rows_deleted += metrics["deletes"]
        log.info(
            "catalog sink %s: batch %d upserted %d row(s), deleted %d key(s): version %s",
            self.sink.name,
            batch_id,
            metrics["changes"] - metrics["deletes"],
            metrics["deletes"],
            version,
        )

    def _last_changes(self, batch: DataFrame) -> DataFrame:
        """Per key, its last change in the batch but -U: the rows of the table's columns, with their row kind."""
        columns = [*self.columns, ROW_KIND]
        ordered = batch.withColumn(BATCH_ORDER, F.monotonically_increasing_id()).where(F.col(ROW_KIND) != UPDATE_BEFORE)
        order = [F.col(EMIT_ORDER), F.col(BATCH_ORDER)] if EMIT_ORDER in batch.columns else [F.col(BATCH_ORDER)]
        last = Window.partitionBy(*map(quoted, self.sink.key)).orderBy(*(column.desc() for column in order))
        return ordered.withColumn("__rank", F.row_number().over(last)).where("__rank = 1").select(*map(quoted, columns))

    def _remove_older(self, versions: str, keep: set[str]) -> None:
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
