"""Connections built by the postgres provider's ``PostgresHook`` reach every PostgreSQL client of a job: lookup
joins (per key, async, batched, and the full cache's JDBC scan) and the plans' and aggregations' upsert sink.

Two extras prove it: ``options`` setting a ``search_path`` under which an unqualified table name resolves only when
the extra is honoured, and ``sslmode=require`` against a throwaway server that rejects every connection without TLS.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from airflow.sdk import Connection
from pyspark.sql import SparkSession

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.job import LookupJoinJob, LookupReloadJob
from spark_tables.core.lookup.table import LookupSpec, SourceTable
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.hooks.postgres import connect_args
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.lookup.join import run_lookup_join
from spark_tables.jobs.lookup.postgres import ASYNC_CONNECTIONS, PostgresLookupSource
from spark_tables.jobs.lookup.reload import run_lookup_reload
from spark_tables.jobs.streaming.sinks.writers import sink_writer
from tests.spark.postgres import PG
from tests.throwaway_postgres import throwaway_postgres

pytestmark = pytest.mark.spark

SCHEMA = "connection_extras_spark_tests"
#: Found only in SCHEMA: the jobs name them unqualified.
DIMENSION, COUNTS = "customers_by_search_path", "counts_by_search_path"
CUSTOMERS = [(1, "one"), (2, "two"), (3, "three")]
PROBE_KEYS = [1, 2, 1, 4, 3]
CHANGES = "page STRING, views BIGINT, __row_kind TINYINT"


def hook_args(port: int, dbname: str, **extra: Any) -> dict[str, Any]:
    """The connection arguments of a postgres connection with ``extra``, as the Airflow side builds them."""
    conn = Connection(
        conn_id="warehouse",
        conn_type="postgres",
        host=PG["host"],
        port=port,
        schema=dbname,
        login=PG["user"],
        extra=json.dumps(extra),
    )
    return connect_args(conn, "test connection")


def _execute(args: dict[str, Any], *statements: str) -> list[tuple]:
    with psycopg.connect(**args, autocommit=True) as connection:
        rows: list[tuple] = []
        for statement in statements:
            cursor = connection.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
        return rows


def _create_tables(args: dict[str, Any]) -> None:
    _execute(
        args,
        f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE",
        f"CREATE SCHEMA {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.{DIMENSION} (id integer NOT NULL, name text)",
        "INSERT INTO {}.{} VALUES {}".format(SCHEMA, DIMENSION, ", ".join(f"({k}, '{n}')" for k, n in CUSTOMERS)),
        f"CREATE TABLE {SCHEMA}.{COUNTS} (page text PRIMARY KEY, views bigint)",
    )


@pytest.fixture(scope="module")
def search_path() -> Iterator[dict[str, Any]]:
    """The test database's connection arguments with ``options`` putting SCHEMA on the search path."""
    plain = hook_args(PG["port"], PG["dbname"])
    _create_tables(plain)
    yield hook_args(PG["port"], PG["dbname"], options=f"-c search_path={SCHEMA}")
    _execute(plain, f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


@pytest.fixture(scope="module")
def tls() -> Iterator[dict[str, Any]]:
    """Connection arguments with ``sslmode=require`` (and the search path) for a server that takes TLS only."""
    with throwaway_postgres(tls_only=True) as port:
        args = hook_args(port, "postgres", sslmode="require", options=f"-c search_path={SCHEMA}")
        _create_tables(args)
        with pytest.raises(psycopg.OperationalError, match="no encryption"):  # without TLS: rejected
            psycopg.connect(**{**args, "sslmode": "disable"})
        yield args


@pytest.fixture(params=["search_path", "tls"])
def connection(request: pytest.FixtureRequest) -> dict[str, Any]:
    return request.getfixturevalue(request.param)


def _spec(args: dict[str, Any], tmp_path: Path, cache: str, **options: str) -> LookupSpec:
    return LookupSpec(
        name="customers",
        source=SourceTable(kind="postgres", connection=args, table=DIMENSION, key=("id",)),
        options={"lookup.cache": cache, **options},
        snapshots=(tmp_path / "snapshots").as_uri(),
    )


@pytest.mark.parametrize(
    ("cache", "options"),
    [
        ("NONE", {}),
        ("NONE", {"lookup.async": "true"}),
        ("PARTIAL", {"lookup.partial-cache.max-rows": "10"}),
        ("FULL", {"lookup.full-cache.periodic-reload.interval": "1 h"}),
    ],
    ids=["none", "async", "partial", "full"],
)
def test_a_lookup_join_reads_its_table_through_the_connections_extras(
    spark: SparkSession, connection: dict[str, Any], tmp_path: Path, cache: str, options: dict[str, str]
) -> None:
    spark.createDataFrame(list(enumerate(PROBE_KEYS)), "row INT, customer_id INT").createOrReplaceTempView("probe")
    spec = _spec(connection, tmp_path, cache, **options)
    if cache == "FULL":
        run_lookup_reload(spark, LookupReloadJob(lookup=spec), Cancellation())  # the JDBC scan
    job = LookupJoinJob(
        lookup=spec, on=("customer_id",), metrics_uri=(tmp_path / "metrics").as_uri(), probe="SELECT * FROM probe"
    )

    run_lookup_join(spark, dataclasses.replace(job, output="joined_by_extras", mode="overwrite"), Cancellation())

    names = dict(CUSTOMERS)
    assert sorted(tuple(row) for row in spark.table("joined_by_extras").collect()) == [
        (row, key, names.get(key)) for row, key in enumerate(PROBE_KEYS)
    ]


def test_without_the_options_extra_the_unqualified_table_is_not_found(
    spark: SparkSession, search_path: dict[str, Any]
) -> None:
    without = {name: value for name, value in search_path.items() if name != "options"}
    source = PostgresLookupSource(SourceTable(kind="postgres", connection=without, table=DIMENSION, key=("id",)))
    try:
        with pytest.raises(psycopg.errors.UndefinedTable):
            source.lookup((1,))
        with pytest.raises(psycopg.errors.UndefinedTable):
            asyncio.run(source.lookup_async((1,)))
        with pytest.raises(Exception, match=f'relation "{DIMENSION}" does not exist'):
            source.schema(spark)  # through Spark's JDBC reader
    finally:
        source.close()


def test_concurrent_async_lookups_share_one_pool_of_connections_named_by_the_extra(
    search_path: dict[str, Any],
) -> None:
    view = "customers_with_backend"  # each row says which server process (so which connection) read it
    _execute(search_path, f"CREATE OR REPLACE VIEW {view} AS SELECT id, name, pg_backend_pid() AS pid FROM {DIMENSION}")
    args = {**search_path, "application_name": "spark_tables_pool_test"}
    source = PostgresLookupSource(SourceTable(kind="postgres", connection=args, table=view, key=("id",)))
    keys = [(key,) for key in [1, 2, 3] * 8]

    async def at_once() -> tuple[list, list[tuple]]:
        found = await asyncio.gather(*(source.lookup_async(key) for key in keys))
        named = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'spark_tables_pool_test'"
        return found, _execute(search_path, named)

    try:
        found, opened = asyncio.run(at_once())
    finally:
        source.close()

    names = dict(CUSTOMERS)
    assert [[(key, name) for key, name, _ in rows] for rows in found] == [[(key, names[key])] for (key,) in keys]
    # more lookups than connections: they waited for a free one of the pool's
    assert len({pid for rows in found for *_, pid in rows}) <= ASYNC_CONNECTIONS
    assert opened == [(ASYNC_CONNECTIONS,)]


def test_an_async_lookup_whose_connection_cannot_be_made_fails_with_its_error(search_path: dict[str, Any]) -> None:
    unreachable = {**search_path, "port": 1, "password": "s3cret-password"}
    source = PostgresLookupSource(SourceTable(kind="postgres", connection=unreachable, table=DIMENSION, key=("id",)))

    with pytest.raises(psycopg.OperationalError, match="port 1 failed"):  # not the pool's timeout
        asyncio.run(source.lookup_async((1,)))
    source.close()


def test_the_postgres_sink_writes_its_table_through_the_connections_extras(
    spark: SparkSession, connection: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "changes"
    folder.mkdir()
    changes = [("home", 3, 0), ("about", 1, 0), ("home", 5, 2)]  # +I, +I, +U
    names = [field.split()[0] for field in CHANGES.split(",")]
    (folder / "1.json").write_text("".join(json.dumps(dict(zip(names, c, strict=True))) + "\n" for c in changes))
    sink = PostgresUpsertSink(name="counts", conn_id="warehouse", table=COUNTS, key=("page",))
    writer = sink_writer(sink, connection=connection)

    frame = spark.readStream.schema(CHANGES).json(str(folder))
    writer.start(frame, checkpoint=str(tmp_path / "checkpoint"), query_name="sink_by_extras").awaitTermination()

    assert writer.report()["rows_upserted"] == 2
    assert _execute(connection, f"SELECT page, views FROM {COUNTS} ORDER BY page") == [("about", 1), ("home", 5)]
    assert _execute(connection, f"SELECT count(*) FROM {SCHEMA}.{COUNTS}") == [(2,)]
    _execute(connection, f"TRUNCATE {COUNTS}")


def test_a_sink_whose_connection_lacks_the_options_extra_fails_naming_the_table(
    spark: SparkSession, search_path: dict[str, Any], tmp_path: Path
) -> None:
    without = {name: value for name, value in search_path.items() if name != "options"}
    sink = PostgresUpsertSink(name="counts", conn_id="warehouse", table=COUNTS, key=("page",))
    (tmp_path / "changes").mkdir()

    with pytest.raises(SpecError, match=f"postgres sink counts: table {COUNTS} does not exist"):
        sink_writer(sink, connection=without).start(
            spark.readStream.schema(CHANGES).json(str(tmp_path / "changes")),
            checkpoint=str(tmp_path / "checkpoint"),
            query_name="sink_without_extras",
        )
