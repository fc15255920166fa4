"""A catalog table kept by key (``TableUpsertSink``) takes updating streams: each batch's last change per key (but
-U) is applied as the table's format can (``jobs.table_format``: a new version of a file table switched to, one
MERGE into a Delta table), exactly once across restarts; a buffered query flushes in micro-batches, so buffering
costs one commit per flush instead of one per batch.

A key that two rows of a batch upsert with other values, neither retracted in between (+I or +U after +I or +U, no
-U or -D), is not the key of the query's rows (two groups of an aggregation keyed by part of its grouping columns,
say): the batch fails in one line naming the key's values, as the format's write first counts the changes, before
it writes. The same row sent twice (a join of a stream with a row repeated in it) is one row."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.streaming.sinks import TableUpsertSink
from spark_tables.jobs.changelog import DELETE, EMIT_ORDER, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE, quoted
from spark_tables.jobs.streaming.sinks.writer import BATCH_ORDER, SinkWriter, data_columns
from spark_tables.jobs.table_format.choice import tables_of
from spark_tables.jobs.table_format.tables import DELETED

#: The column that says a batch's key was upserted twice without a retraction between.
_TWICE = "__spark_tables_upserted_twice"


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
        (``DELETED``), which fails the batch where two rows upsert the key with other values (the same row sent twice,
        as a join of a stream with a repeated row sends it, is one row)."""
        keys = [quoted(name) for name in self.sink.key]
        ordered = batch.withColumn(BATCH_ORDER, F.monotonically_increasing_id())
        order = [F.col(EMIT_ORDER), F.col(BATCH_ORDER)] if EMIT_ORDER in batch.columns else [F.col(BATCH_ORDER)]
        kind, upserts = F.col(ROW_KIND), [INSERT, UPDATE_AFTER]
        row, previous = (
            F.to_json(F.struct(*map(quoted, self._table.columns))),
            Window.partitionBy(*keys).orderBy(*order),
        )
        upserted_again = (
            kind.isin(upserts) & F.lag(kind).over(previous).isin(upserts) & ~row.eqNullSafe(F.lag(row).over(previous))
        )
        flagged = ordered.withColumn(_TWICE, F.max(upserted_again).over(Window.partitionBy(*keys)))
        last = Window.partitionBy(*keys).orderBy(*(column.desc() for column in order))
        deleted = F.when(F.col(_TWICE), F.raise_error(self._not_unique(keys))).otherwise(kind == DELETE)
        columns = [*map(quoted, self._table.columns), deleted.alias(DELETED)]
        last_changes = flagged.where(kind != UPDATE_BEFORE).withColumn("__rank", F.row_number().over(last))
        return last_changes.where("__rank = 1").select(*columns)

    def _not_unique(self, keys: list[Column]) -> Column:
        """The one line of a batch in which the sink's key is not unique, naming its values."""
        values = F.concat_ws(", ", *(F.coalesce(key.cast("string"), F.lit("null")) for key in keys))
        named = ", ".join(self.sink.key)
        return F.concat(
            F.lit(f"catalog sink {self.sink.name}: two rows of one micro-batch upsert key ({named}) = ("),
            values,
            F.lit(
                ") with other values, neither retracting the other: the sink's key must identify the query's rows "
                "(an aggregation's grouping columns)"
            ),
        )
