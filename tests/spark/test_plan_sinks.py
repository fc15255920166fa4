"""A plan's sinks on the shared local session: changelog streams read from JSON files the tests write, one
available-now query per step, each step restarting from the checkpoint the earlier ones left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession

from spark_tables.core.errors import JobError, SpecError
from spark_tables.core.streaming.sinks import PlanSink, PostgresUpsertSink, TableSink
from spark_tables.jobs.changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from spark_tables.jobs.streaming.sinks import postgres_upsert
from spark_tables.jobs.streaming.sinks.writers import sink_writer
from spark_tables.jobs.table_format.batch_marks import TABLE_MARKS
from tests.spark.postgres import PG

pytestmark = pytest.mark.spark

SCHEMA = "plan_sinks_spark_tests"
TOTALS = "id INT, name STRING, amount BIGINT, __row_kind TINYINT"
#: A batch of changes of ``TOTALS``: key 1 inserted then updated, 2 inserted, 3 inserted then deleted, 9 deleted.
TOTALS_CHANGES = (
    (INSERT, 1, "a", 10),
    (UPDATE_BEFORE, 1, "a", 10),
    (UPDATE_AFTER, 1, "a2", 11),
    (INSERT, 2, "b", 20),
    (INSERT, 3, "c", 30),
    (DELETE, 3, "c", 30),
    (DELETE, 9, "old", 90),
)


def _connect() -> psycopg.Connection:
    return psycopg.connect(host=PG["host"], port=PG["port"], dbname=PG["dbname"], user=PG["user"], autocommit=True)


def _execute(*statements: str) -> None:
    with _connect() as connection:
        for statement in statements:
            connection.execute(statement)


def _fetch(query: str) -> list[tuple]:
    with _connect() as connection:
        return connection.execute(query).fetchall()


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    _execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE", f"CREATE SCHEMA {SCHEMA}")
    yield SCHEMA
    _execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


class Changelog:
    """A folder of JSON files a stream reads, a file per ``add``, and the checkpoint its queries share."""

    def __init__(self, spark: SparkSession, root: Path, schema: str) -> None:
        self.spark, self.schema = spark, schema
        self.folder, self.checkpoint = root / "changes", root / "checkpoint"
        self.folder.mkdir()
        self.files = 0

    def add(self, *changes: tuple) -> None:
        """One file of ``(row kind, column values...)`` tuples, in the schema's order; none: an empty file."""
        names = [field.split()[0] for field in self.schema.split(",")]
        lines = [json.dumps(dict(zip(names, (*values, kind), strict=True))) for kind, *values in changes]
        self.files += 1
        (self.folder / f"{self.files:03d}.json").write_text("".join(line + "\n" for line in lines))

    def run(self, sink: PlanSink, connection: dict | None = None) -> dict:
        """One available-now query over the files not read yet, the sink's writer connecting with ``connection``
        (default: the tests' PostgreSQL); what the sink reports it wrote."""
        writer = sink_writer(sink, connection=dict(PG) if connection is None else connection)
        frame = self.spark.readStream.schema(self.schema).json(str(self.folder))
        writer.start(frame, checkpoint=str(self.checkpoint), query_name=f"sink_{sink.name}").awaitTermination()
        return writer.report()

    def forget_last_commit(self) -> int:
        """Delete the last batch's commit, so that the next query runs that batch again; returns its id."""
        commits = self.checkpoint / "commits"
        last = max(int(path.name) for path in commits.iterdir() if path.name.isdigit())
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)
        return last

    def forget_mark(self, batch_id: int) -> None:
        """Delete a catalog sink's mark of a batch, as when its query stopped between writing the batch and its mark."""
        (self.checkpoint / TABLE_MARKS / str(batch_id)).unlink()
        (self.checkpoint / TABLE_MARKS / f".{batch_id}.crc").unlink(missing_ok=True)

    def query_id(self) -> str:
        return json.loads((self.checkpoint / "metadata").read_text())["id"]


def _totals(table: str) -> dict[int, tuple]:
    return {row[0]: row[1:] for row in _fetch(f"SELECT id, name, amount FROM {table}")}


def _counts(report: dict, *names: str) -> tuple[int, ...]:
    return tuple(report[name] for name in names)


def test_postgres_sink_applies_the_last_change_of_each_key_once_per_batch_across_restarts_and_replays(
    spark: SparkSession, pg_schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_upsert, "ROWS_PER_STATEMENT", 3)
    table = f"{pg_schema}.totals"
    _execute(
        f"CREATE TABLE {table} (id integer PRIMARY KEY, name text NOT NULL, amount bigint)",
        f"INSERT INTO {table} VALUES (8, 'kept', 80), (9, 'old', 90)",
        # Each statement on the table, with its transaction: what the sink sent, seen from PostgreSQL.
        f"CREATE TABLE {pg_schema}.statements (step integer, txid bigint, operation text)",
        f"CREATE TABLE {pg_schema}.step (step integer)",
        f"INSERT INTO {pg_schema}.step VALUES (1)",
        f"CREATE FUNCTION {pg_schema}.record_statement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"INSERT INTO {pg_schema}.statements SELECT step, txid_current(), TG_OP FROM {pg_schema}.step; "
        "RETURN NULL; END $$",
        f"CREATE TRIGGER recorded AFTER INSERT OR UPDATE OR DELETE ON {table} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {pg_schema}.record_statement()",
    )
    sink = PostgresUpsertSink(name="totals", conn_id="warehouse", table=table, key=["id"])
    changes = Changelog(spark, tmp_path, TOTALS)
    changes.add(*TOTALS_CHANGES)
    changes.add(
        (DELETE, 4, "gone", 0),
        (INSERT, 4, "d", 40),
        (INSERT, 5, "e", 1),
        (UPDATE_AFTER, 5, "e", 2),
        (UPDATE_AFTER, 5, "e", 3),
        (UPDATE_BEFORE, 8, "kept", 80),
    )

    first = changes.run(sink)

    expected = {1: ("a2", 11), 2: ("b", 20), 4: ("d", 40), 5: ("e", 3), 8: ("kept", 80)}
    assert _totals(table) == expected
    # Keys 1, 2, 4 and 5 upserted, 3 and 9 deleted (3 after its insert, in the same batch), 8's -U ignored.
    assert _counts(first, "batches", "write_calls", "rows_upserted", "rows_deleted") == (1, 1, 4, 2)
    statements = _fetch(f"SELECT txid, operation FROM {pg_schema}.statements")
    assert len({txid for txid, _ in statements}) == 1  # one transaction
    # Three rows a statement: the four upserts in two (each fires INSERT and UPDATE triggers), the deletes in one.
    assert sorted(operation for _, operation in statements) == ["DELETE", "INSERT", "INSERT", "UPDATE", "UPDATE"]

    _execute(f"UPDATE {pg_schema}.step SET step = 2")
    changes.add((UPDATE_BEFORE, 1, "a2", 11), (UPDATE_BEFORE, 2, "b", 20))
    changes.add()

    nothing_to_write = changes.run(sink)

    assert _counts(nothing_to_write, "batches", "write_calls", "rows_upserted", "rows_deleted") == (1, 0, 0, 0)
    assert _fetch(f"SELECT count(*) FROM {pg_schema}.statements WHERE step = 2") == [(0,)]
    assert _totals(table) == expected

    changes.add((UPDATE_BEFORE, 2, "b", 20), (UPDATE_AFTER, 2, "b2", 21), (INSERT, 6, "f", 60), (DELETE, 5, "e", 3))

    restarted = changes.run(sink)

    expected = {1: ("a2", 11), 2: ("b2", 21), 4: ("d", 40), 6: ("f", 60), 8: ("kept", 80)}
    assert _totals(table) == expected  # the new file only: nothing lost, nothing applied twice
    assert _counts(restarted, "batches", "write_calls", "rows_upserted", "rows_deleted") == (1, 1, 2, 1)

    changes.forget_last_commit()

    replayed = changes.run(sink)

    assert _counts(replayed, "batches", "write_calls", "rows_upserted", "rows_deleted") == (1, 1, 2, 1)
    assert _totals(table) == expected


@pytest.mark.parametrize(
    ("create", "columns", "key", "error"),
    [
        ("(id integer, name text, amount bigint)", TOTALS, "id", "has no primary key or unique index on exactly"),
        (
            "(id integer, name text, amount bigint, UNIQUE (id, name))",
            TOTALS,
            "id",
            "has no primary key or unique index on exactly",
        ),
        ("(id integer PRIMARY KEY, name text)", TOTALS, "id", "has no column amount"),
        (None, TOTALS, "id", f"does not exist in {PG['host']}:{PG['port']} database spark_tables_test"),
        ("(id integer PRIMARY KEY, name text)", "name STRING, __row_kind TINYINT", "id", "gives no key column id"),
    ],
    ids=["no-unique-index", "index-on-other-columns", "missing-column", "missing-table", "key-not-in-query"],
)
def test_a_postgres_sink_that_cannot_work_fails_before_its_query_starts(
    spark: SparkSession, pg_schema: str, tmp_path: Path, create: str | None, columns: str, key: str, error: str
) -> None:
    table = f"{pg_schema}.cannot_work"
    _execute(f"DROP TABLE IF EXISTS {table}", *([f"CREATE TABLE {table} {create}"] if create else []))
    sink = PostgresUpsertSink(name="cannot_work", conn_id="warehouse", table=table, key=[key])
    changes = Changelog(spark, tmp_path, columns)

    with pytest.raises(SpecError, match=error) as failed:
        changes.run(sink)

    assert "\n" not in str(failed.value) and "cannot_work" in str(failed.value)
    assert not spark.streams.active and not changes.checkpoint.exists()


def test_a_postgres_sink_that_cannot_connect_names_the_server_but_not_the_password(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = PostgresUpsertSink(name="unreachable", conn_id="warehouse", table="totals", key=["id"])
    writer = sink_writer(sink, connection={**PG, "port": 1, "password": "s3cret-password"})
    folder = tmp_path / "changes"
    folder.mkdir()
    frame = spark.readStream.schema(TOTALS).json(str(folder))

    with pytest.raises(JobError, match=r"cannot connect to 127\.0\.0\.1:1 database spark_tables_test") as failed:
        writer.start(frame, checkpoint=str(tmp_path / "checkpoint"), query_name="sink_unreachable")

    assert "s3cret-password" not in str(failed.value) and "\n" not in str(failed.value)
    assert not spark.streams.active


def _location(spark: SparkSession, table: str) -> Path:
    described = json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table} AS JSON").first()[0])
    return Path(described["location"].removeprefix("file:"))


def _rows(spark: SparkSession, table: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.table(table).collect())


@pytest.mark.parametrize("using", ["parquet", "json OPTIONS (compression 'gzip')"], ids=["parquet", "json"])
def test_table_sink_appends_each_batch_exactly_once_across_restarts_and_replays(
    spark: SparkSession, db: str, tmp_path: Path, using: str
) -> None:
    table = f"{db}.events"
    spark.sql(f"CREATE TABLE {table} (id INT, name STRING) USING {using}")
    spark.sql(f"INSERT INTO {table} VALUES (0, 'before')")
    sink = TableSink(table)
    changes = Changelog(spark, tmp_path, "name STRING, id INT, __row_kind TINYINT")  # not the table's order
    changes.add((INSERT, "a", 1), (INSERT, "b", 2))

    first = changes.run(sink)

    assert _rows(spark, table) == [(0, "before"), (1, "a"), (2, "b")]
    assert _counts(first, "batches", "write_calls", "rows_appended") == (1, 1, 2)

    changes.add((INSERT, "c", 3))

    restarted = changes.run(sink)

    spark.sql(f"INSERT INTO {table} VALUES (9, 'inserted by a batch job')")  # stays visible, unlike with toTable
    expected = [(0, "before"), (1, "a"), (2, "b"), (3, "c"), (9, "inserted by a batch job")]
    assert _rows(spark, table) == expected
    assert _counts(restarted, "batches", "write_calls", "rows_appended") == (1, 1, 1)

    # A batch stopped after moving its files in, before its mark: it runs again and replaces its files.
    batch = changes.forget_last_commit()
    changes.forget_mark(batch)
    location = _location(spark, table)
    (location / f"_spark_tables_{changes.query_id()}-{batch}").mkdir()

    interrupted = changes.run(sink)

    assert _rows(spark, table) == expected
    assert _counts(interrupted, "batches", "write_calls", "rows_appended", "batches_already_written") == (1, 1, 1, 0)
    assert not [path.name for path in location.iterdir() if path.name.startswith("_spark_tables_")]

    # A batch whose mark was written runs again: skipped. Then an empty file's batch: nothing to write.
    changes.forget_last_commit()
    changes.add()

    replayed = changes.run(sink)

    assert _rows(spark, table) == expected
    assert _counts(replayed, "batches", "write_calls", "rows_appended", "batches_already_written") == (2, 0, 0, 1)


def test_a_replayed_batch_of_a_stateful_query_is_skipped_with_its_state_committed(
    spark: SparkSession, db: str, tmp_path: Path
) -> None:
    """Spark checks that every state store of a batch committed: a skipped batch's plan (here a deduplication) still
    runs, writing nothing."""
    table = f"{db}.deduplicated"
    spark.sql(f"CREATE TABLE {table} (id INT, name STRING) USING parquet")
    changes = Changelog(spark, tmp_path, "name STRING, id INT, __row_kind TINYINT")
    changes.add((INSERT, "a", 1), (INSERT, "a", 1), (INSERT, "b", 2))

    def run() -> dict:
        writer = sink_writer(TableSink(table), connection=None)
        frame = spark.readStream.schema(changes.schema).json(str(changes.folder)).dropDuplicates(["id"])
        writer.start(frame, checkpoint=str(changes.checkpoint), query_name="deduplicated").awaitTermination()
        return writer.report()

    run()
    changes.forget_last_commit()
    replayed = run()

    assert _counts(replayed, "batches", "write_calls", "batches_already_written") == (1, 0, 1)
    assert _rows(spark, table) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize(
    ("create", "columns", "error"),
    [
        (None, "id INT, __row_kind TINYINT", r"TABLE_OR_VIEW_NOT_FOUND"),
        ("VIEW {table} AS SELECT 1 AS id", "id INT, __row_kind TINYINT", "is a view"),
        ("TABLE {table} (id INT, day STRING) USING parquet PARTITIONED BY (day)", "id INT", "partitioned by day"),
        (
            "TABLE {table} (id INT, name STRING) USING parquet",
            "id INT, label STRING, __row_kind TINYINT",
            r"not in the table: label; missing: name",
        ),
        (
            "TABLE {table} (id INT, name STRING) USING parquet",
            "id BIGINT, name STRING, __row_kind TINYINT",
            "column id is bigint in the query but int in the table",
        ),
    ],
    ids=["missing-table", "view", "partitioned", "other-columns", "other-type"],
)
def test_a_table_sink_that_cannot_work_fails_before_its_query_starts(
    spark: SparkSession, db: str, tmp_path: Path, create: str | None, columns: str, error: str
) -> None:
    table = f"{db}.cannot_work"
    if create:
        spark.sql("CREATE " + create.format(table=table))
    changes = Changelog(spark, tmp_path, columns)

    with pytest.raises(SpecError, match=error) as failed:
        changes.run(TableSink(table))

    assert "\n" not in str(failed.value)
    assert not spark.streams.active and not changes.checkpoint.exists()
