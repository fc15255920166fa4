"""A catalog table takes insert-only streams: the rows are appended, exactly once across restarts, as the table's
format can (``jobs.table_format``: a file table's files moved in under the batch's name with a mark in the
checkpoint, a Delta table's idempotent append); others fail before the query starts."""

from __future__ import annotations

from pyspark.sql import DataFrame

from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.streaming.sinks import TableSink
from spark_tables.jobs.streaming.sinks.writer import SinkWriter, data_columns
from spark_tables.jobs.table_format.choice import tables_of


class TableSinkWriter(SinkWriter):
    """Appends an insert-only stream to a table of the catalog, exactly once."""

    sink: TableSink

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        spark = frame.sparkSession
        tables = tables_of(spark, TableIdentifier.parse(self.sink.name))
        self._table = tables.sink_table(spark, self.sink.name, data_columns(frame), checkpoint, writes="a plan appends")
        self._spark = spark

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        spark = self.session(batch)
        self._count(self._table.append(spark, batch, query_id=self.query_id(), batch_id=batch_id), batch, batch_id)
