"""Streaming results into Delta Lake and Delta tables as streaming sources (``jobs/table_format/delta_streams.py``):
a plan's appends exactly once by Delta's idempotent writes, upserts by key as one MERGE a batch (deletes as
deletes) buffered or not, with the commits and files each run wrote; a Delta table read as its appends or as its
change data feed. The jobs run on the Spark Connect server whose catalog loads Delta (``delta_server``), as session
mode runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import TableSink, TableUpsertSink
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.changelog import INSERT, UPDATE_BEFORE
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.tasks.sql_reader import read_plan_statement
from tests.spark.page_views import T0, TWO_RUNS, add_views, lose_commit
from tests.spark.test_plan_sinks import TOTALS, TOTALS_CHANGES, Changelog

pytestmark = pytest.mark.integration

VIEWS_PER_PAGE = "SELECT page, count(*) AS views, sum(ms) AS total_ms FROM STREAM(views) GROUP BY page"


def _history(spark: Any, table: str) -> list[tuple[int, str, dict[str, str]]]:
    rows = spark.sql(f"DESCRIBE HISTORY {table}").orderBy("version").collect()
    return [(row["version"], row["operation"], row["operationMetrics"] or {}) for row in rows]


def _rows(spark: Any, table: str) -> list[tuple]:
    return sorted(map(tuple, spark.table(table).collect()))


def _execute(spark: Any, statement: str, options: PlanOptions, at_ms: int) -> dict[str, Any]:
    """Run a plan statement; what its one sink's query did."""
    result = run_plan_statement(spark, read_plan_statement(statement), options, Cancellation(), FixedClock(at_ms))
    return result.execute["queries"][0]


def _counts(report: dict, *names: str) -> tuple[int, ...]:
    return tuple(report[name] for name in names)


@pytest.fixture
def views(lake: tuple[Any, str], tmp_path: Path) -> Path:
    """The JSON-file stream table ``views`` of ``page_views`` in the test's database, made current."""
    spark, database = lake
    folder = tmp_path / "views"
    folder.mkdir()
    spark.sql(
        f"CREATE TABLE {database}.views (page STRING, user STRING, ms BIGINT, ts TIMESTAMP) USING json "
        f"OPTIONS (maxFilesPerTrigger 1) LOCATION '{folder}'"
    )
    spark.sql(f"USE {database}")
    return folder


def test_an_aggregation_is_merged_into_a_delta_table_by_key_a_commit_a_batch_or_a_flush(
    lake: tuple[Any, str], views: Path, tmp_path: Path
) -> None:
    spark, database = lake
    sinks = {}
    for name in ("plain", "buffered"):
        table = f"{database}.{name}_views"
        spark.sql(f"CREATE TABLE {table} (page STRING, views BIGINT, total_ms BIGINT) USING delta")
        spark.sql(f"INSERT INTO {table} VALUES ('legacy', 7, 70)")
        sinks[name] = TableUpsertSink(name=table, key=("page",))

    def run(name: str, at_ms: int, **configuration: str) -> dict[str, Any]:
        job = StreamingAggregationJob(
            query=VIEWS_PER_PAGE,
            sink=sinks[name],
            checkpoint=str(tmp_path / name),
            options=StreamingOptions(configuration=configuration),
        )
        return run_streaming_aggregation(spark, job, Cancellation(), FixedClock(at_ms)).query

    for name, rows in TWO_RUNS[0]:  # three micro-batches
        add_views(views, name, *rows)
    plain, buffered = run("plain", T0), run("buffered", T0, **{"execution.flush.max-interval": "1 h"})
    spark.catalog.refreshTable("views")  # the files added since the session last listed them
    expected = sorted(
        [("legacy", 7, 70), *map(tuple, spark.sql(VIEWS_PER_PAGE.replace("STREAM(views)", "views")).collect())]
    )
    assert _rows(spark, sinks["plain"].name) == _rows(spark, sinks["buffered"].name) == expected

    # A MERGE a batch that changed the table, unbuffered; one a flush, buffered (FLIP-365: fewer commits and files).
    assert _counts(plain, "write_calls", "rows_upserted", "rows_deleted") == (3, 5, 0)
    assert _counts(buffered, "write_calls", "rows_upserted") == (1, 2)
    for name, report in (("plain", plain), ("buffered", buffered)):
        merges = [metrics for _, operation, metrics in _history(spark, sinks[name].name) if operation == "MERGE"]
        assert len(merges) == report["write_calls"]
        # The files a run reports are those its commits added, as Delta's history counts them.
        assert report["files_written"] == sum(int(m["numTargetFilesAdded"]) for m in merges) >= len(merges)

    # A batch run again after its MERGE (the checkpoint lost its commit): its mark says it was written, no commit.
    versions = len(_history(spark, sinks["plain"].name))
    lose_commit(
        tmp_path / "plain", max(int(p.name) for p in (tmp_path / "plain" / "commits").iterdir() if p.name.isdigit())
    )
    again = run("plain", T0 + 1000)
    assert _counts(again, "batches_already_written", "write_calls") == (1, 0)
    assert len(_history(spark, sinks["plain"].name)) == versions
    assert _rows(spark, sinks["plain"].name) == expected


def test_an_upsert_into_a_delta_table_deletes_deleted_keys_and_applies_a_replayed_batch_once(
    lake: tuple[Any, str], tmp_path: Path
) -> None:
    spark, database = lake
    table = f"{database}.totals"
    spark.sql(f"CREATE TABLE {table} (id INT, name STRING, amount BIGINT) USING delta PARTITIONED BY (id)")
    spark.sql(f"INSERT INTO {table} VALUES (8, 'kept', 80), (9, 'old', 90)")
    sink = TableUpsertSink(name=table, key=("id",))
    changes = Changelog(spark, tmp_path, TOTALS)
    changes.add(*TOTALS_CHANGES, (UPDATE_BEFORE, 8, "kept", 80))

    first = changes.run(sink)

    expected = [(1, "a2", 11), (2, "b", 20), (8, "kept", 80)]
    assert _rows(spark, table) == expected
    # Keys 1 and 2 upserted; 3 (after its insert, in the same batch) and 9 deleted; 8's -U ignored.
    assert _counts(first, "batches", "write_calls", "rows_upserted", "rows_deleted") == (1, 1, 2, 2)
    (version, operation, metrics) = _history(spark, table)[-1]
    assert (operation, metrics["numTargetRowsInserted"], metrics["numTargetRowsDeleted"]) == ("MERGE", "2", "1")
    assert first["files_written"] == int(metrics["numTargetFilesAdded"]) == 2, "a file a new partition"

    # Run again between its commit and its mark (a batch run again after its mark is skipped: the aggregation's
    # test): the same last change per key merged again leaves the same rows, in one more commit.
    changes.forget_mark(changes.forget_last_commit())
    merged_again = changes.run(sink)
    assert _counts(merged_again, "batches_already_written", "write_calls") == (0, 1)
    assert _rows(spark, table) == expected
    assert _history(spark, table)[-1][0] == version + 1


def test_a_plan_appends_to_a_delta_table_once_a_batch_by_delta_s_idempotent_writes(
    lake: tuple[Any, str], tmp_path: Path
) -> None:
    spark, database = lake
    table = f"{database}.events"
    spark.sql(f"CREATE TABLE {table} (id INT, name STRING) USING delta")
    spark.sql(f"INSERT INTO {table} VALUES (0, 'before')")
    changes = Changelog(spark, tmp_path, "name STRING, id INT, __row_kind TINYINT")  # not the table's order
    changes.add((INSERT, "a", 1), (INSERT, "b", 2))

    first = changes.run(TableSink(table))

    assert _rows(spark, table) == [(0, "before"), (1, "a"), (2, "b")]
    assert _counts(first, "batches", "write_calls", "rows_appended", "files_written") == (1, 1, 2, 1)
    version, operation, metrics = _history(spark, table)[-1]
    assert (operation, metrics["numOutputRows"]) == ("WRITE", "2")

    # The batch runs again (the checkpoint lost its commit): Delta finds the query's batch id in its log, skips it.
    changes.forget_last_commit()
    replayed = changes.run(TableSink(table))

    assert _counts(replayed, "batches", "write_calls", "rows_appended", "batches_already_written") == (1, 0, 0, 1)
    assert _history(spark, table)[-1][0] == version
    assert _rows(spark, table) == [(0, "before"), (1, "a"), (2, "b")]


def test_a_plan_reads_a_delta_table_s_appends_or_its_change_feed_and_upserts_into_delta(
    lake: tuple[Any, str], tmp_path: Path
) -> None:
    """A Delta source without a change data feed is read as its appends (the plan's results buffered); with one, the
    plan's aggregation takes its updates and deletes as retractions, and the keyed Delta sink ends equal to the batch
    query."""
    spark, database = lake
    spark.sql(f"USE {database}")
    query = "SELECT shop, COUNT(*) AS orders, SUM(amount) AS total FROM {orders} GROUP BY shop"
    for feed in ("false", "true"):
        orders, counts = f"{database}.orders_{feed}", f"{database}.counts_{feed}"
        spark.sql(
            f"CREATE TABLE {orders} (order_id INT, shop STRING, amount BIGINT) USING delta "
            f"TBLPROPERTIES ('delta.enableChangeDataFeed' = '{feed}')"
        )
        spark.sql(f"INSERT INTO {orders} VALUES (1, 'north', 10), (2, 'south', 20), (3, 'north', 30)")
        spark.sql(f"CREATE TABLE {counts} (shop STRING, orders BIGINT, total BIGINT) USING delta")
        # The appends' plan buffers its aggregation's results (FLIP-365) in front of the keyed Delta sink.
        buffered = {"execution.flush.max-interval": "1 h"} if feed == "false" else {}
        options = PlanOptions(
            configuration=buffered,
            table_upsert_sinks=(TableUpsertSink(counts, ("shop",)),),
            checkpoints=str(tmp_path / f"checkpoints_{feed}"),
        )
        plan = f"'{tmp_path}/plan_{feed}.json'"
        statement = f"COMPILE AND EXECUTE PLAN {plan} FOR INSERT INTO {counts} {query.format(orders=orders)}"

        first = _execute(spark, statement, options, T0)
        assert _rows(spark, counts) == [("north", 2, 40), ("south", 1, 20)]
        assert first["write_calls"] == 1
        assert ("buffer" in first) == bool(buffered)

    # The change data feed's next commits: an insert, an update moving an order, a delete emptying a group.
    orders, counts = f"{database}.orders_true", f"{database}.counts_true"
    spark.sql(f"INSERT INTO {orders} VALUES (4, 'south', 5)")
    spark.sql(f"UPDATE {orders} SET shop = 'south' WHERE order_id = 1")
    spark.sql(f"DELETE FROM {orders} WHERE order_id = 3")
    _execute(spark, f"EXECUTE PLAN {plan}", options, T0 + 1000)

    assert _rows(spark, counts) == sorted(map(tuple, spark.sql(query.format(orders=orders)).collect()))
    assert _rows(spark, counts) == [("south", 3, 35)], "north, emptied, deleted"
