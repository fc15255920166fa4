"""A catalog table kept by key (``TableUpsertSink``) takes updating streams: each batch's last change per key (but
-U) is applied as the table's format can (``jobs.table_format``: a new version of a file table switched to, one
MERGE into a Delta table), exactly once across restarts; a buffered query flushes in micro-batches, so buffering
costs one commit per flush instead of one per batch."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.streaming.sinks import TableUpsertSink
from spark_tables.jobs.changelog import DELETE, EMIT_ORDER, ROW_KIND, UPDATE_BEFORE, quoted
from spark_tables.jobs.streaming.sinks.writer import BATCH_ORDER, SinkWriter, data_columns
from spark_tables.jobs.table_format.choice import tables_of
from spark_tables.jobs.table_format.tables import DELETED


class TableUpsertSinkWriter(SinkWriter):
    """Keeps a table of the catalog equal to an updating stream, by key, a commit per batch that changes it."""

    sink: TableUpsertSink

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        spark = frame.sparkSession
        tables = tables_of(spark, TableIdentifier.parse(self.sink.name))
        self._table = tables.sink_table(
            spark, self.sink.name, data_columns(frame), checkpoint, writes="an upsert sink writes"
        )
        missing_key = [column for column in self.sink.key if column not in self._table.columns]
        if missing_key:
            raise SpecError(f"catalog sink {self.sink.name}: the query gives no key column {', '.join(missing_key)}")
        self._spark = spark

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        written = self._table.upsert(
            self.session(batch), self._last_changes(batch), self.sink.key, query_id=self.query_id(), batch_id=batch_id
        )
        self._count(written, batch, batch_id)

    def _last_changes(self, batch: DataFrame) -> DataFrame:
        """Per key, its last change in the batch but -U: the table's columns, and whether the change deletes the key
        (``DELETED``)."""
        columns = [*map(quoted, self._table.columns), (F.col(ROW_KIND) == DELETE).alias(DELETED)]
        ordered = batch.withColumn(BATCH_ORDER, F.monotonically_increasing_id()).where(F.col(ROW_KIND) != UPDATE_BEFORE)
        order = [F.col(EMIT_ORDER), F.col(BATCH_ORDER)] if EMIT_ORDER in batch.columns else [F.col(BATCH_ORDER)]
        last = Window.partitionBy(*map(quoted, self.sink.key)).orderBy(*(column.desc() for column in order))
        return ordered.withColumn("__rank", F.row_number().over(last)).where("__rank = 1").select(*columns)
