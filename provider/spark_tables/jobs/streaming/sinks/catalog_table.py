"""A catalog table takes insert-only streams: the rows are appended, exactly once across restarts. Spark's own file
sink (``DataStreamWriter.toTable``) is not used: once it has written into a table's folder, the table reads only
the files its ``_spark_metadata`` log lists, so the rows the table held before, and any a batch ``INSERT`` adds
later, vanish from it. Instead a batch is written to a hidden folder in the table's location
(``_spark_tables_<query id>-<batch id>``: readers skip names starting with ``_``), its files are moved in under
names carrying the query's and the batch's ids, and then a mark for the batch is written in the checkpoint. A
replayed batch whose mark exists is skipped; one whose staging folder is still there stopped part way, so the
files it moved in are deleted by their names and the batch is written again. Only unpartitioned file tables
(parquet, orc, json, csv) take this; others fail before the query starts.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.errors import SpecError, one_line
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.streaming.sinks import TableSink
from spark_tables.jobs import files
from spark_tables.jobs.streaming.changelog import EMIT_ORDER, ROW_KIND
from spark_tables.jobs.streaming.sinks.writer import SinkWriter

log = logging.getLogger(__name__)

#: Catalog table formats whose tables are folders of files that Spark writes by path.
FILE_FORMATS = ("parquet", "orc", "json", "csv")
#: The folder of the checkpoint holding the mark of the last batch a catalog table sink wrote.
TABLE_MARKS = "sink_commits"


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


def describe_table(spark: SparkSession, name: str) -> dict[str, Any]:
    try:
        row = spark.sql(f"DESCRIBE TABLE EXTENDED {TableIdentifier.parse(name).quoted()} AS JSON").first()
    except AnalysisException as err:
        raise SpecError(f"catalog sink {name}: {one_line(err)}") from None
    return json.loads(row[0])
