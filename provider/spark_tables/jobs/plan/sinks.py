"""The streaming query that writes a compiled plan's changelog into its sink, and what each sink wrote.

The stream reaching a sink is a changelog: the data columns, then Flink's row kind (``changelog.ROW_KIND``).
Each sink writes every micro-batch from ``foreachBatch`` and makes a replayed batch harmless, since Spark runs the
last batch of a checkpoint again when the query stopped before committing it:

- A catalog table takes insert-only streams: the rows are appended, exactly once across restarts. Spark's own file
  sink (``DataStreamWriter.toTable``) is not used: once it has written into a table's folder, the table reads only
  the files its ``_spark_metadata`` log lists, so the rows the table held before, and any a batch ``INSERT`` adds
  later, vanish from it. Instead a batch is written to a hidden folder in the table's location
  (``_spark_tables_<query id>-<batch id>``: readers skip names starting with ``_``), its files are moved in under
  names carrying the query's and the batch's ids, and then a mark for the batch is written in the checkpoint. A
  replayed batch whose mark exists is skipped; one whose staging folder is still there stopped part way, so the
  files it moved in are deleted by their names and the batch is written again. Only unpartitioned file tables
  (parquet, orc, json, csv) take this; others fail before the query starts.
- A catalog table kept by key (``TableUpsertSink``) takes updating streams: a file table cannot update rows in place,
  so each batch that changes anything writes a new version of the table (its rows whose keys the batch did not
  change, and each key's last change but deletes and -U) into its own folder,
  ``<the table's first location>.versions/<query id>-<batch id>``, and ``ALTER TABLE ... SET LOCATION`` switches
  the table to it: one catalog operation, so a reader sees the version before or after, never a mix. The version
  before stays (a reader may still be listing it); older versions the sink wrote are deleted; the table's first
  location, with the rows it held before, is left as it was. A replayed batch finds the table on its own version
  and is skipped; one that stopped before the switch writes its version again. A buffered query flushes in
  micro-batches, so buffering costs one version per flush instead of one per batch.
- A PostgreSQL table takes updating streams by key: per batch, the last change of each key counts (+I and +U
  upsert the row with ``INSERT ... ON CONFLICT (key) DO UPDATE``, -D deletes the key, -U is ignored as Flink's
  upsert sinks ignore it), applied in one transaction. Upserting and deleting by key are idempotent, so a replayed
  batch, applied whole once more, leaves the table as it was (Spark replays only the last batch: none came after
  it). The order of a key's changes is taken before the batch is collected, from ``monotonically_increasing_id()``,
  which follows each partition's order: the plan's operators emit a key's changes from one partition, in order. A
  batch that carries ``EMIT_ORDER`` (a flush of the buffer, one change a key) is applied in that order.

foreachBatch runs its function one batch at a time: in the driver, or in session mode in a Python process of the
Spark Connect server (``connect_functions``), where the writer is a copy of the job's. So each writer adds up what it
wrote in a plain object and writes it after every batch into a file beside the checkpoint (``<checkpoint>-sink-counts``,
a file per start of the query), which ``SinkWriter.report()`` adds up once the query has ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Observation, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.errors import JobError, SpecError, one_line
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.plan.sinks import PlanSink, PostgresUpsertSink, TableSink, TableUpsertSink
from spark_tables.core.postgres import describe
from spark_tables.jobs import files, postgres
from spark_tables.jobs.connect_functions import carried_function
from spark_tables.jobs.plan.changelog import DELETE, EMIT_ORDER, ROW_KIND, UPDATE_BEFORE, quoted

log = logging.getLogger(__name__)

#: Catalog table formats whose tables are folders of files that Spark writes by path.
FILE_FORMATS = ("parquet", "orc", "json", "csv")
#: The folder of the checkpoint holding the mark of the last batch a catalog table sink wrote.
TABLE_MARKS = "sink_commits"
#: Rows one PostgreSQL statement carries at most (and at most 65535 parameters, the protocol's limit).
ROWS_PER_STATEMENT = 1000
_MAX_PARAMETERS = 65535
#: The column carrying each row's position in its batch from before the batch is collected.
_ORDER = "__spark_tables_order"
#: The suffix of the folder beside a keyed catalog table's first location that holds the versions its sink writes.
VERSIONS = ".versions"
#: The suffix of the folder beside a sink query's checkpoint where its writer leaves its counts.
COUNTS = "-sink-counts"


@dataclass
class SinkCounts:
    """What a sink's query wrote, added up over its micro-batches."""

    #: Micro-batches the query handed to the sink, empty ones and replays included.
    batches: int = 0
    #: Batches that wrote anything: one PostgreSQL transaction, or one set of files moved into the table.
    write_calls: int = 0
    #: PostgreSQL: rows sent as upserts and keys sent as deletes (a key the table lacks is still counted).
    rows_upserted: int = 0
    rows_deleted: int = 0
    #: Catalog table: rows appended.
    rows_appended: int = 0
    #: Catalog table: replayed batches skipped because their rows were in the table already.
    batches_already_written: int = 0


class SinkWriter(ABC):
    """Starts the query writing a changelog into one sink, and counts what it writes."""

    def __init__(self, sink: PlanSink) -> None:
        self.sink = sink
        self.counts = SinkCounts()
        #: The job's session (the one that started the query), kept by ``prepare`` where a batch needs it; None in
        #: the Spark Connect server's copy, whose batches bring one on the job's session.
        self._spark: SparkSession | None = None
        self._checkpoint = ""
        self._query_id: str | None = None
        #: The files of this writer's counts, one per start of its query; the last is the running one's.
        self._counts_files: list[str] = []

    def __getstate__(self) -> dict[str, Any]:
        """The writer as foreachBatch's function carries it to a Spark Connect server: without a Spark session."""
        return {**self.__dict__, "_spark": None}

    def session(self, batch: DataFrame) -> SparkSession:
        """The session a batch's catalog operations run in: the job's (the batch's is a clone of it on a driver)."""
        return self._spark if self._spark is not None else batch.sparkSession

    def query_id(self) -> str:
        """The query's id, as Spark keeps it in the checkpoint's metadata: the same across restarts from it."""
        if self._query_id is None:
            self._query_id = json.loads(files.read_text(f"{self._checkpoint.rstrip('/')}/metadata"))["id"]
        return self._query_id

    @staticmethod
    def for_sink(sink: PlanSink, *, connection: dict | None) -> SinkWriter:
        """The writer of ``sink``; ``connection`` holds a PostgreSQL sink's connection arguments (``PostgresHook``'s,
        ``jobs/postgres.py``) and is ignored for a catalog table."""
        if isinstance(sink, PostgresUpsertSink):
            return PostgresSinkWriter(sink, connection)
        if isinstance(sink, TableUpsertSink):
            return TableUpsertSinkWriter(sink)
        return TableSinkWriter(sink)

    def start(
        self,
        frame: DataFrame,
        *,
        checkpoint: str,
        query_name: str,
        available_now: bool = True,
        interval: str = "1 second",
        output_mode: str = "append",
    ) -> StreamingQuery:
        """Check that the sink can take ``frame`` (``SpecError`` when not, before anything runs), then start its
        query: available-now, or a micro-batch every ``interval``; ``output_mode`` is Spark's."""
        self.prepare(frame, checkpoint)
        self._checkpoint = checkpoint
        if not self._counts_files:
            files.remove(self._counts_folder)  # left by a run that ended before its report
        self._counts_files.append(f"{self._counts_folder}/{uuid.uuid4().hex}.json")
        self.counts = SinkCounts()
        writer = (
            frame.writeStream.outputMode(output_mode)
            .foreachBatch(carried_function(frame.sparkSession, self.write_counted))
            .option("checkpointLocation", checkpoint)
            .queryName(query_name)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            interval_ms = whole_milliseconds(parse_duration(interval, "interval"))  # Spark counts milliseconds
            writer = writer.trigger(processingTime=f"{interval_ms} milliseconds")
        return writer.start()

    @property
    def _counts_folder(self) -> str:
        """The folder beside the checkpoint where the query's counts are, a file per start."""
        return f"{self._checkpoint.rstrip('/')}{COUNTS}"

    def write_counted(self, batch: DataFrame, batch_id: int) -> None:
        """foreachBatch's function: write the batch, then what this start of the query wrote so far."""
        self._write_batch(batch, batch_id)
        self.record_counts()

    def record_counts(self) -> None:
        """Write the counts of the query's running start into its file."""
        if self._counts_files:
            files.write_bytes(self._counts_files[-1], json.dumps(dataclasses.asdict(self.counts)).encode())

    def report(self) -> dict[str, Any]:
        """What the sink wrote, added up over the starts of its query; once, when it has ended (its files go)."""
        total = {name: 0 for name in dataclasses.asdict(SinkCounts())}
        for location in self._counts_files:
            if files.exists(location):  # a start that ran no batch wrote none
                for name, value in json.loads(files.read_text(location)).items():
                    total[name] += value
        if self._counts_files:
            files.remove(self._counts_folder)
        return {"sink": self.sink.name, "kind": self.sink.kind, **total}

    def _skip(self, batch: DataFrame, batch_id: int) -> None:
        """Write nothing for a replayed batch that is in the table already, but run its plan all the same: its
        stateful operators must commit their state for the batch (Spark checks that every state store did)."""
        batch.write.format("noop").mode("overwrite").save()
        self.counts.batches_already_written += 1
        log.info("catalog sink %s: batch %d is in the table already", self.sink.name, batch_id)

    @abstractmethod
    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        """Check the sink against the frame and keep what its batches need; ``SpecError`` when it cannot work."""

    @abstractmethod
    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Write one micro-batch; foreachBatch calls it in the driver."""


class TableSinkWriter(SinkWriter):
    """Appends an insert-only stream to an unpartitioned file table of the catalog, exactly once."""

    sink: TableSink

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        spark = frame.sparkSession
        table = file_table(spark, self.sink.name, frame, "a plan appends")
        self._columns = table.columns
        self._format = table.format
        self._options = table.options
        self._location = table.location
        self._marks = f"{checkpoint.rstrip('/')}/{TABLE_MARKS}"
        self._spark = spark

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        mark = f"{self._marks}/{batch_id}"
        if files.exists(mark):
            self._skip(batch, batch_id)
            return
        query_id = self.query_id()
        # The names tie each file to this query (stable across restarts from its checkpoint) and batch.
        moved_prefix = f"part-{query_id}-{batch_id}-"
        staging = f"{self._location}/_spark_tables_{query_id}-{batch_id}"
        if files.exists(staging):
            removed = files.remove_named(self._location, moved_prefix)
            log.warning(
                "catalog sink %s: batch %d stopped part way; %d file(s) removed", self.sink.name, batch_id, removed
            )
        observation = Observation()
        rows = batch.select(*self._columns).observe(observation, F.count(F.lit(1)).alias("rows"))
        rows.write.format(self._format).options(**self._options).mode("overwrite").save(staging)
        appended = observation.get["rows"]
        if appended:
            for name in files.data_file_names(staging):
                files.move(f"{staging}/{name}", f"{self._location}/{moved_prefix}{name.removeprefix('part-')}")
            self.counts.write_calls += 1
            self.counts.rows_appended += appended
        files.write_bytes(mark, b"")
        files.remove(f"{self._marks}/{batch_id - 1}")  # Spark replays its last batch only
        files.remove(staging)
        # The session that started the query lists the table's files again.
        self.session(batch).catalog.refreshTable(self.sink.name)


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
        seen = _describe(spark, self.sink.name)["location"].rstrip("/")
        first = seen.split(VERSIONS + "/")[0] if VERSIONS + "/" in seen else seen
        with switch_lock(f"{first}{VERSIONS}", self.sink.name, self.query_id()):
            self._write_version(spark, batch, batch_id, first)

    def _write_version(self, spark: SparkSession, batch: DataFrame, batch_id: int, first: str) -> None:
        """Under the table's switch lock: the version of the batch made from the table's current rows, switched to,
        and the versions before the last removed; another writer of the table waits, so no write is lost and no
        version that is current is removed."""
        current = _describe(spark, self.sink.name)["location"].rstrip("/")
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
        ordered = batch.withColumn(_ORDER, F.monotonically_increasing_id()).where(F.col(ROW_KIND) != UPDATE_BEFORE)
        order = [F.col(EMIT_ORDER), F.col(_ORDER)] if EMIT_ORDER in batch.columns else [F.col(_ORDER)]
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


@dataclass(frozen=True)
class FileTable:
    """An unpartitioned file table of the catalog, as a sink writes it."""

    columns: list[str]
    format: str
    options: dict[str, str]
    location: str


def file_table(spark: SparkSession, name: str, frame: DataFrame, writes: str) -> FileTable:
    """Catalog table ``name``, checked to be an unpartitioned file table with ``frame``'s columns and types (its
    row kind and emit order left out); ``SpecError`` when not, ``writes`` saying what the sink does."""
    table = _describe(spark, name)
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
    schema = spark.table(TableIdentifier.parse(name).quoted()).schema
    given = {field.name: field.dataType for field in frame.schema if field.name not in (ROW_KIND, EMIT_ORDER)}
    extra = [column for column in given if column not in schema.names]
    missing = [column for column in schema.names if column not in given]
    if extra or missing:
        raise SpecError(
            f"catalog sink {name}: the query's columns differ from the table's "
            f"(not in the table: {', '.join(extra) or 'none'}; missing: {', '.join(missing) or 'none'})"
        )
    for field in schema:
        if given[field.name] != field.dataType:
            raise SpecError(
                f"catalog sink {name}: column {field.name} is {given[field.name].simpleString()} in the query "
                f"but {field.dataType.simpleString()} in the table: cast it"
            )
    return FileTable(
        columns=schema.names,
        format=table["provider"],
        options={key: value for key, value in table.get("storage_properties", {}).items() if key != "path"},
        location=table["location"].rstrip("/"),
    )


def _describe(spark: SparkSession, name: str) -> dict[str, Any]:
    try:
        row = spark.sql(f"DESCRIBE TABLE EXTENDED {TableIdentifier.parse(name).quoted()} AS JSON").first()
    except AnalysisException as err:
        raise SpecError(f"catalog sink {name}: {one_line(err)}") from None
    return json.loads(row[0])


class PostgresSinkWriter(SinkWriter):
    """Applies an updating stream to a PostgreSQL table by key, one transaction per micro-batch."""

    sink: PostgresUpsertSink

    #: The columns it writes, in order (the frame's but the row kind), known once the query's frame is checked.
    columns: list[str]

    def __init__(self, sink: PostgresUpsertSink, connection: dict | None) -> None:
        super().__init__(sink)
        if not connection:
            raise SpecError(f"postgres sink {sink.name}: no settings for connection {sink.conn_id}")
        self._settings = connection
        self._table = sql.Identifier(*sink.table.split("."))
        self._where = describe(connection)

    def _connect(self) -> psycopg.Connection:
        """A connection whose changes wait for ``commit``: a batch is one transaction."""
        try:
            return postgres.connect(self._settings, autocommit=False, connect_timeout=30)
        except psycopg.Error as err:
            raise JobError(
                f"postgres sink {self.sink.name}: cannot connect to {self._where}: {self._safe(err)}"
            ) from None

    def _safe(self, error: BaseException) -> str:
        return postgres.safe_line(error, self._settings)

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        name, key = self.sink.name, list(self.sink.key)
        columns = [column for column in frame.columns if column not in (ROW_KIND, EMIT_ORDER)]
        missing_key = [column for column in key if column not in columns]
        if missing_key:
            raise SpecError(f"postgres sink {name}: the query gives no key column {', '.join(missing_key)}")
        types, unique_keys = self._table_catalog()
        if types is None:
            raise SpecError(
                f"postgres sink {name}: table {self.sink.table} does not exist in {self._where}: create it "
                f"with a primary key on ({', '.join(key)})"
            )
        unknown = [column for column in columns if column not in types]
        if unknown:
            raise SpecError(
                f"postgres sink {name}: table {self.sink.table} has no column {', '.join(unknown)}: add it to the "
                "table or leave it out of the query"
            )
        if sorted(key) not in [sorted(index_columns) for index_columns in unique_keys]:
            raise SpecError(
                f"postgres sink {name}: table {self.sink.table} has no primary key or unique index on exactly "
                f"({', '.join(key)}), which upserts need: CREATE UNIQUE INDEX ON {self.sink.table} ({', '.join(key)})"
            )
        self.columns = columns
        self._key_positions = [columns.index(column) for column in key]
        self._key_types = [types[column] for column in key]
        self._rows_per_statement = max(1, min(ROWS_PER_STATEMENT, _MAX_PARAMETERS // len(columns)))

    def _table_catalog(self) -> tuple[dict[str, str] | None, list[list[str]]]:
        """The table's columns with their types (None when there is no such table), and the column lists of
        the indexes ``ON CONFLICT (key)`` can use: unique, immediate, valid, on plain columns, over all rows."""
        try:
            with self._connect() as connection:
                table_name = self._table.as_string(connection)
                if connection.execute("SELECT to_regclass(%s)", (table_name,)).fetchone()[0] is None:
                    return None, []
                types = connection.execute(
                    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                    (table_name,),
                ).fetchall()
                unique_keys = connection.execute(
                    "SELECT array(SELECT a.attname::text FROM generate_series(0, i.indnkeyatts - 1) AS k "
                    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[k]) "
                    "FROM pg_index i WHERE i.indrelid = %s::regclass AND i.indisunique AND i.indimmediate "
                    "AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL",
                    (table_name,),
                ).fetchall()
        except psycopg.Error as err:
            raise JobError(
                f"postgres sink {self.sink.name}: cannot read table {self.sink.table} in {self._where}: "
                f"{self._safe(err)}"
            ) from None
        return dict(types), [columns for (columns,) in unique_keys]

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        self.write_changes(self.last_changes(batch), f"batch {batch_id}")

    def write_changes(self, changes: dict[tuple, tuple | None], label: str) -> None:
        """Apply ``changes`` (``last_changes``'s) in one transaction, the upserts in their order, then the deletes;
        ``label`` names the write in the log and in errors (``batch 7``)."""
        upserts = [row for row in changes.values() if row is not None]
        deletes = [key for key, row in changes.items() if row is None]
        if not upserts and not deletes:
            return
        try:
            with self._connect() as connection:
                with connection.cursor() as cursor:
                    for rows in _chunks(upserts, self._rows_per_statement):
                        cursor.execute(self._upsert(len(rows)), [value for row in rows for value in row])
                    for keys in _chunks(deletes, self._rows_per_statement):
                        cursor.execute(self._delete(len(keys)), [value for key in keys for value in key])
                connection.commit()
        except psycopg.Error as err:
            raise JobError(
                f"postgres sink {self.sink.name}: {label} failed on table {self.sink.table} in "
                f"{self._where}: {self._safe(err)}"
            ) from None
        self.counts.write_calls += 1
        self.counts.rows_upserted += len(upserts)
        self.counts.rows_deleted += len(deletes)
        log.info(
            "postgres sink %s: %s upserted %d row(s), deleted %d key(s)",
            self.sink.name,
            label,
            len(upserts),
            len(deletes),
        )

    def last_changes(self, batch: DataFrame) -> dict[tuple, tuple | None]:
        """Per key, its last change in the batch but -U: the row to upsert (the frame's columns), or None to
        delete the key; in the batch's ``EMIT_ORDER`` when it has one (a flush of the buffer)."""
        return self.by_key(self.last_change_rows(batch))

    def last_change_rows(self, batch: DataFrame) -> pa.Table:
        """``last_changes`` as Spark's Arrow rows: per key its last change but -U, the frame's columns and the row
        kind, one row a key, in ``last_changes``' order."""
        emit_order = [EMIT_ORDER] if EMIT_ORDER in batch.columns else []
        changes = (
            batch.select(*self.columns, ROW_KIND, *emit_order)
            .withColumn(_ORDER, F.monotonically_increasing_id())
            .where(F.col(ROW_KIND) != UPDATE_BEFORE)
            .toArrow()
        )
        positions = changes.column(_ORDER).to_pylist()
        order = list(zip(changes.column(EMIT_ORDER).to_pylist(), positions, strict=True)) if emit_order else positions
        keys = list(zip(*(changes.column(self.columns[at]).to_pylist() for at in self._key_positions), strict=True))
        last_of_key: dict[tuple, int] = {}
        for index in sorted(range(len(keys)), key=order.__getitem__):
            last_of_key[keys[index]] = index
        return changes.select([*self.columns, ROW_KIND]).take(pa.array(last_of_key.values(), type=pa.int64()))

    def by_key(self, rows: pa.Table) -> dict[tuple, tuple | None]:
        """``last_change_rows``' rows as ``last_changes`` gives them: per key, the row to upsert, or None."""
        kinds = rows.column(ROW_KIND).to_pylist()
        values = zip(*(rows.column(column).to_pylist() for column in self.columns), strict=True)
        return {
            tuple(row[at] for at in self._key_positions): None if kind == DELETE else row
            for row, kind in zip(values, kinds, strict=True)
        }

    def _upsert(self, row_count: int) -> sql.Composed:
        """``INSERT INTO t (c...) VALUES (...), ... ON CONFLICT (key) DO UPDATE SET c = EXCLUDED.c, ...``."""
        row = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(self.columns)))
        values = [column for column in self.columns if column not in self.sink.key]
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(column)) for column in values)
            )
            if values
            else sql.SQL("DO NOTHING")
        )
        return sql.SQL("INSERT INTO {} ({}) VALUES {} ON CONFLICT ({}) {}").format(
            self._table,
            sql.SQL(", ").join(map(sql.Identifier, self.columns)),
            sql.SQL(", ").join([row] * row_count),
            sql.SQL(", ").join(map(sql.Identifier, self.sink.key)),
            action,
        )

    def _delete(self, key_count: int) -> sql.Composed:
        """``DELETE FROM t WHERE (k...) IN (VALUES (%s::type, ...), ...)``: typed, as VALUES has no column to
        take its types from."""
        key = sql.SQL("({})").format(
            sql.SQL(", ").join(sql.SQL("%s::{}").format(sql.SQL(type_name)) for type_name in self._key_types)
        )
        return sql.SQL("DELETE FROM {} WHERE ({}) IN (VALUES {})").format(
            self._table, sql.SQL(", ").join(map(sql.Identifier, self.sink.key)), sql.SQL(", ").join([key] * key_count)
        )


def _chunks(items: Sequence[tuple], size: int) -> Iterator[Sequence[tuple]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
