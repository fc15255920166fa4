"""A PostgreSQL table takes updating streams by key: per batch, the last change of each key counts (+I and +U
upsert the row with ``INSERT ... ON CONFLICT (key) DO UPDATE``, -D deletes the key, -U is ignored as Flink's
upsert sinks ignore it), applied in one transaction. Upserting and deleting by key are idempotent, so a replayed
batch, applied whole once more, leaves the table as it was (Spark replays only the last batch: none came after
it). The order of a key's changes is taken before the batch is collected, from ``monotonically_increasing_id()``,
which follows each partition's order: the plan's operators emit a key's changes from one partition, in order. A
batch that carries ``EMIT_ORDER`` (a flush of the buffer, one change a key) is applied in that order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import psycopg
import pyarrow as pa
from psycopg import sql
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_tables.core.errors import JobError, SpecError
from spark_tables.core.postgres import describe
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs import postgres
from spark_tables.jobs.changelog import DELETE, EMIT_ORDER, ROW_KIND, UPDATE_BEFORE
from spark_tables.jobs.streaming.sinks.writer import BATCH_ORDER, SinkWriter

log = logging.getLogger(__name__)

#: Rows one PostgreSQL statement carries at most (and at most 65535 parameters, the protocol's limit).
ROWS_PER_STATEMENT = 1000
_MAX_PARAMETERS = 65535


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
            .withColumn(BATCH_ORDER, F.monotonically_increasing_id())
            .where(F.col(ROW_KIND) != UPDATE_BEFORE)
            .toArrow()
        )
        positions = changes.column(BATCH_ORDER).to_pylist()
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
