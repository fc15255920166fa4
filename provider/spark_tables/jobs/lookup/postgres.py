"""PostgreSQL as a lookup source: per-key queries with psycopg (prepared, autocommit), async ones on a
``psycopg_pool`` pool, scans with Spark's JDBC reader.

``connection`` holds the connection arguments the Airflow side built with ``PostgresHook``; every connection goes
through ``jobs/postgres.py``. The scan needs PostgreSQL's JDBC driver on the driver's and executors' class path
(the Airflow side adds it to ``jars``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_tables.core.lookup.table import SourceTable
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs import postgres
from spark_tables.jobs.data_types import INTEGRAL
from spark_tables.jobs.lookup.source import LookupSource

#: Rows the JDBC reader fetches per round trip (its default, 0, fetches the whole result at once).
FETCH_SIZE = 10_000
#: Connections the async lookups of one source share at most: a connection runs one query at a time, so this
#: bounds how many of them PostgreSQL serves at once, whatever ``lookup.async.capacity`` lets wait.
ASYNC_CONNECTIONS = 4
#: How long an async lookup waits for a free connection before it fails (and is retried, ``lookup.max-retries``).
ASYNC_WAIT_SECONDS = 600.0


class PostgresLookupSource(LookupSource):
    def __init__(self, table: SourceTable) -> None:
        super().__init__(table)
        self._connection: psycopg.Connection | None = None
        #: The opening of the async lookups' pool, and the event loop it is opened in (its connections belong there).
        self._pool: tuple[asyncio.Task[AsyncConnectionPool], asyncio.AbstractEventLoop] | None = None
        self._table_name = sql.Identifier(*self.table.table.split("."))
        self._query = self._select(self.table.columns, where_key=True)
        self._many_query: sql.Composed | None = None

    def _select(self, columns: Sequence[str], *, where_key: bool) -> sql.Composed:
        names = sql.SQL(", ").join(sql.Identifier(c) for c in columns) if columns else sql.SQL("*")
        query = sql.SQL("SELECT {} FROM {}").format(names, self._table_name)
        if where_key:
            condition = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in self.table.key)
            query = sql.SQL("{} WHERE {}").format(query, condition)
        return query

    def _connect(self) -> psycopg.Connection:
        return postgres.connect(self.table.connection, autocommit=True, prepare_threshold=0)

    def _connected(self) -> psycopg.Connection:
        if self._connection is None or self._connection.closed:
            self._connection = self._connect()
        return self._connection

    def lookup(self, key: tuple) -> Sequence[Sequence]:
        """The value columns (``table.columns``, which the driver fills in when none were named) of each match."""
        connection = self._connected()
        try:
            return connection.execute(self._query, key).fetchall()
        except psycopg.OperationalError:
            connection.close()  # a broken connection: the next attempt opens a new one
            raise

    def lookup_many(self, keys: Sequence[tuple]) -> Sequence[Sequence[Sequence]]:
        """The rows of every key in one query: the keys go as one array a key column, cast to that column's type,
        and each row comes back with the ordinal of its key, so no key value is compared in Python."""
        connection = self._connected()
        try:
            if self._many_query is None:
                self._many_query = self._select_many(connection)
            found = connection.execute(self._many_query, [list(column) for column in zip(*keys, strict=True)])
            results: list[list[tuple]] = [[] for _ in keys]
            for ordinal, *values in found:
                results[ordinal - 1].append(tuple(values))
        except psycopg.OperationalError:
            connection.close()
            raise
        return results

    def _select_many(self, connection: psycopg.Connection) -> sql.Composed:
        """``SELECT k.ord, t.<columns> FROM unnest(%s::<type>[], ...) WITH ORDINALITY k(...) JOIN <table> t ON ...``."""
        types = dict(
            connection.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                (self._table_name.as_string(connection),),
            ).fetchall()
        )
        aliases = [sql.Identifier(f"k{i}") for i in range(len(self.table.key))]
        arrays = sql.SQL(", ").join(sql.SQL("%s::{}[]").format(sql.SQL(types[key])) for key in self.table.key)
        condition = sql.SQL(" AND ").join(
            sql.SQL("t.{} = k.{}").format(sql.Identifier(key), alias)
            for key, alias in zip(self.table.key, aliases, strict=True)
        )
        return sql.SQL("SELECT k.ord, {} FROM unnest({}) WITH ORDINALITY AS k({}, ord) JOIN {} AS t ON {}").format(
            sql.SQL(", ").join(sql.SQL("t.{}").format(sql.Identifier(c)) for c in self.table.columns)
            if self.table.columns
            else sql.SQL("t.*"),
            arrays,
            sql.SQL(", ").join(aliases),
            self._table_name,
            condition,
        )

    async def lookup_async(self, key: tuple) -> Sequence[Sequence]:
        """``lookup`` on one of ``ASYNC_CONNECTIONS`` pooled async connections (opened by the first async lookup),
        waiting for a free one; the pool replaces a connection that broke."""
        pool = await self._opened_pool()
        async with pool.connection() as connection:
            cursor = await connection.execute(self._query, key)
            return await cursor.fetchall()

    async def _opened_pool(self) -> AsyncConnectionPool:
        """The running loop's pool, opened once however many lookups ask for it at once (again after a failed
        opening, which each of them saw fail)."""
        loop = asyncio.get_running_loop()
        if self._pool is None or self._pool[1] is not loop or _failed(self._pool[0]):
            opening = postgres.open_async_pool(
                self.table.connection, size=ASYNC_CONNECTIONS, timeout=ASYNC_WAIT_SECONDS
            )
            self._pool = (loop.create_task(opening), loop)
        return await self._pool[0]

    def _jdbc(self, spark: SparkSession) -> Any:
        reader = postgres.jdbc_reader(spark, self.table.connection)
        # A ``timestamp`` column holds wall-clock times: TIMESTAMP_NTZ keeps them as they are on both paths, where
        # Spark's TIMESTAMP would read them as instants in the JVM's zone (JDBC) but in UTC (per key, through Arrow).
        return reader.option("fetchsize", FETCH_SIZE).option("preferTimestampNTZ", "true")

    def _ordered(self, frame: DataFrame) -> DataFrame:
        """Key columns first, then the value columns (all others when none were named)."""
        values = self.table.columns or [c for c in frame.columns if c not in self.table.key]
        return frame.select(*self.table.key, *values)

    def schema(self, spark: SparkSession) -> StructType:
        query = self._select((), where_key=False).as_string(None) + " WHERE false"
        return self._ordered(self._jdbc(spark).option("query", query).load()).schema

    def scan(self, spark: SparkSession, num_partitions: int, version: TableVersion | None = None) -> DataFrame:
        """The table as it is now (PostgreSQL keeps no versions), in range partitions of an integer first key."""
        table = self._select((), where_key=False).as_string(None).removeprefix("SELECT * FROM ")
        first_key = self.table.key[0]
        reader = self._jdbc(spark).option("dbtable", table)
        if num_partitions > 1 and isinstance(self.schema(spark)[first_key].dataType, INTEGRAL):
            low, high = self._bounds(first_key)
            if low is not None and high > low:
                reader = (
                    reader.option("partitionColumn", first_key)
                    .option("lowerBound", low)
                    .option("upperBound", high + 1)
                    .option("numPartitions", num_partitions)
                )
        return self._ordered(reader.load())

    def _bounds(self, column: str) -> tuple[Any, Any]:
        query = sql.SQL("SELECT min({0}), max({0}) FROM {1}").format(sql.Identifier(column), self._table_name)
        with self._connect() as connection:
            return connection.execute(query).fetchone()

    def exclusive(self, resource: str, while_waiting: Callable[[], None]) -> contextlib.AbstractContextManager[bool]:
        """An advisory lock in the table's own database (``jobs/postgres.py``)."""
        return postgres.advisory_lock(self.table.connection, resource, while_waiting)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._pool is not None:
            opening, loop = self._pool
            self._pool = None
            if opening.done() and not _failed(opening) and not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(opening.result().close())
            # else its connections close with their event loop's process


def _failed(task: asyncio.Task) -> bool:
    return task.done() and (task.cancelled() or task.exception() is not None)
