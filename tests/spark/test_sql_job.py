"""The sql job on a real session: tables written, row counts, the last query's rows, one-line failures; and its
CTAS statements' tables, which get CTAS's lifecycle: what the catalog holds and what lies on disk after success,
failure, a stop and a retry."""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.ctas.job import CtasCleanupJob
from spark_tables.core.ctas.ownership import COMPLETE, FILLING, REPLACED, TARGET, replaced_table
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.sql.job import SqlJob as ReadSqlJob
from spark_tables.core.sql.result import SqlResult
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.ctas.lifecycle import CtasFailed, CtasTable
from spark_tables.jobs.entry import run_job
from spark_tables.jobs.sql.runner import run_sql
from spark_tables.tasks.sql_reader import read_statements
from tests.spark.catalog_checks import (
    SLOW_QUERY,
    db_folder,
    files,
    marks,
    no_task_running,
    owner,
    plain_table,
    props,
    rows,
    run,
    table_location,
    tables,
    wait_until,
)

pytestmark = pytest.mark.spark


def SqlJob(statements: Any, **fields: Any) -> ReadSqlJob:
    """The job, its statements read as the operator reads them."""
    return ReadSqlJob(statements=read_statements(statements), **fields)


def test_reports_written_tables_with_their_row_counts(spark: SparkSession) -> None:
    output = run_sql(
        spark,
        SqlJob(
            statements=(
                "CREATE DATABASE IF NOT EXISTS sqljob",
                "DROP TABLE IF EXISTS sqljob.numbers",
                "CREATE TABLE sqljob.numbers USING parquet AS SELECT id FROM range(25)",
                "INSERT INTO sqljob.numbers SELECT id FROM range(5)",
            ),
            owner=owner(),
        ),
        Cancellation(),
    )
    assert output.statements_run == 4
    assert output.tables_written == ["sqljob.numbers"]
    assert output.row_counts == {"sqljob.numbers": 30}
    assert output.rows == [] and output.columns == []


def test_count_rows_false_reports_written_tables_without_counting_them(spark: SparkSession) -> None:
    statements = (
        "CREATE DATABASE IF NOT EXISTS sqljob",
        "CREATE TABLE IF NOT EXISTS sqljob.uncounted (id BIGINT) USING parquet",
        "INSERT OVERWRITE sqljob.uncounted SELECT id FROM range(3)",
    )

    def spark_jobs_of(group: str, work: Any) -> tuple[Any, int]:
        """What ``work()`` returns, and how many Spark jobs it ran."""
        spark.sparkContext.setJobGroup(group, group)
        try:
            return work(), len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
        finally:
            spark.sparkContext.setJobGroup("", "")

    def run(count_rows: bool) -> SqlResult:
        return run_sql(spark, SqlJob(statements=statements, owner=owner(), count_rows=count_rows), Cancellation())

    counted, counted_jobs = spark_jobs_of("counted", lambda: run(True))
    uncounted, uncounted_jobs = spark_jobs_of("uncounted", lambda: run(False))
    _, count_jobs = spark_jobs_of("count", lambda: spark.table("sqljob.uncounted").count())

    assert counted.row_counts == {"sqljob.uncounted": 3} and uncounted.tables_written == ["sqljob.uncounted"]
    assert uncounted.row_counts is None and "row_counts" not in uncounted.to_dict()
    assert count_jobs > 0 and counted_jobs == uncounted_jobs + count_jobs  # the count of the table, nothing else


def test_a_scratch_table_made_and_dropped_by_the_job_is_not_counted(spark: SparkSession) -> None:
    output = run_sql(
        spark,
        SqlJob(
            statements=(
                "CREATE DATABASE IF NOT EXISTS sqljob",
                "DROP TABLE IF EXISTS sqljob.totals",
                "CREATE TABLE sqljob.scratch USING parquet AS SELECT id FROM range(4)",
                "CREATE TABLE sqljob.totals USING parquet AS SELECT count(*) AS n FROM sqljob.scratch",
                "DROP TABLE sqljob.scratch",
            ),
            owner=owner(),
        ),
        Cancellation(),
    )

    assert output.tables_written == ["sqljob.scratch", "sqljob.totals"]
    assert output.row_counts == {"sqljob.totals": 1}  # the scratch table is gone: nothing to count
    assert not spark.catalog.tableExists("sqljob.scratch") and spark.table("sqljob.totals").head().n == 4
    scratch, totals = output.ctas
    assert scratch.dropped_later is True and totals.rows == 1


def test_returns_the_last_querys_rows_capped_and_json_ready(spark: SparkSession) -> None:
    output = run_sql(
        spark,
        SqlJob(
            statements=(
                "SELECT id, CAST(id / 4 AS DECIMAL(10, 2)) AS quarter, DATE'2026-11-20' AS day "
                "FROM range(5) ORDER BY id",
            ),
            max_result_rows=3,
        ),
        Cancellation(),
    )
    assert output.columns == ["id", "quarter", "day"]
    assert output.rows == [[0, "0.00", "2026-11-20"], [1, "0.25", "2026-11-20"], [2, "0.50", "2026-11-20"]]
    assert output.rows_truncated is True
    assert output.tables_written == []


def test_only_the_last_query_is_collected(spark: SparkSession) -> None:
    output = run_sql(spark, SqlJob(statements=("SELECT 1 AS a", "SELECT 2 AS b, 3 AS c")), Cancellation())
    assert output.columns == ["b", "c"]
    assert output.rows == [[2, 3]]
    assert output.rows_truncated is False


def test_a_failing_statement_is_named_with_sparks_first_line(spark: SparkSession) -> None:
    with pytest.raises(CtasFailed) as failure:
        run_sql(spark, SqlJob(statements=("SELECT 1", "SELECT * FROM sqljob.no_such_table")), Cancellation())
    message = str(failure.value)
    assert message.startswith("statement 2/2 failed: [TABLE_OR_VIEW_NOT_FOUND]")
    assert "\n" not in message


def test_an_insert_into_a_table_of_other_columns_names_both_and_what_to_do(spark: SparkSession) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS sqljob")
    spark.sql("CREATE TABLE IF NOT EXISTS sqljob.daily (day STRING, total BIGINT, n BIGINT) USING parquet")
    statements = (
        "CREATE TABLE IF NOT EXISTS sqljob.daily (day STRING, total BIGINT) USING parquet",
        "INSERT INTO sqljob.daily SELECT 'monday' AS day, 3 AS total",
    )
    with pytest.raises(CtasFailed) as failure:
        run_sql(spark, SqlJob(statements=statements), Cancellation())

    message = str(failure.value)
    assert message.startswith("statement 2/2 failed: [INSERT_COLUMN_ARITY_MISMATCH.NOT_ENOUGH_DATA_COLUMNS]")
    assert "Table columns: `day`, `total`, `n`. Data columns: `day`, `total`." in message  # Spark's explanation
    assert message.endswith("drop it or write to a table of another name)") and "\n" not in message


def test_run_job_turns_a_failure_into_a_one_line_error_result(spark: SparkSession) -> None:
    result = run_job(spark, SqlJob(statements=("SELECT nope FROM range(1)",)))
    assert not result.succeeded
    assert result.error.startswith("statement 1/1 failed: [UNRESOLVED_COLUMN")
    assert "\n" not in result.error
    assert result.application_id == spark.sparkContext.applicationId


def test_run_job_reports_output_and_where_it_ran(spark: SparkSession) -> None:
    result = run_job(spark, SqlJob(statements=("SELECT count(*) AS n FROM range(10)",)))
    assert result.succeeded
    assert result.output.rows == [[10]]
    assert result.spark_version == spark.version
    assert result.work_seconds is not None and result.work_seconds >= 0


def test_run_job_with_a_cancellation_requested_before_it_runs_nothing(spark: SparkSession) -> None:
    cancellation = Cancellation()
    cancellation.request("the test asked to stop")
    result = run_job(spark, SqlJob(statements=("CREATE DATABASE IF NOT EXISTS sqljob_cancelled",)), cancellation)
    assert not result.succeeded
    assert result.error.startswith("cancelled")
    assert "the test asked to stop" in result.error
    assert not spark.catalog.databaseExists("sqljob_cancelled")


# --- CTAS statements -----------------------------------------------------------------------------------------

#: Fails at run time, on its fourth row.
FAILING_INSERT = "INSERT INTO {table} SELECT IF(id < 3, id, raise_error('row ' || id || ' is bad')) FROM range(10)"


def sql(*statements: str, try_number: int = 1, **fields: Any) -> SqlJob:
    return SqlJob(statements=statements, owner=owner(try_number), **fields)


def test_a_failure_after_ctas_statements_drops_their_tables_with_their_files(spark: SparkSession, db: str) -> None:
    result = run(
        spark,
        sql(
            f"CREATE TABLE {db}.a USING parquet AS SELECT id FROM range(5)",
            f"INSERT INTO {db}.a SELECT id FROM range(5, 8)",
            f"CREATE TABLE {db}.b PARTITIONED BY (k) AS SELECT id, id % 2 AS k FROM {db}.a",
            "SELECT assert_true(id < 3) AS ok FROM range(10)",
        ),
    )

    assert not result.succeeded
    assert result.error.startswith("statement 4/4 failed: [USER_RAISED_EXCEPTION] '(id < 3)' is not true!")
    undone = [f"dropped the unfinished {db}.a of try 1", f"dropped the unfinished {db}.b of try 1"]
    assert result.error.endswith(f"(undone: {'; '.join(undone)})") and "\n" not in result.error
    assert result.output.undone == undone and result.output.cleaned_up is True
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


PRE_EXISTING = {
    "if-not-exists": [
        "CREATE TABLE IF NOT EXISTS {db}.kept AS SELECT id, 'new' AS s FROM range(9)",
        "CREATE TABLE {db}.made AS SELECT id FROM range(4)",
        FAILING_INSERT.format(table="{db}.made"),
    ],
    "name-taken": [
        "CREATE TABLE {db}.made AS SELECT id FROM range(4)",
        "CREATE TABLE {db}.kept AS SELECT id, 'new' AS s FROM range(9)",
    ],
}


@pytest.mark.parametrize("script", PRE_EXISTING.values(), ids=PRE_EXISTING.keys())
def test_a_table_that_existed_before_survives_the_job_s_failure(
    spark: SparkSession, db: str, script: list[str]
) -> None:
    plain_table(spark, f"{db}.kept", "SELECT id, 'old' AS s FROM range(3)")
    before = files(table_location(spark, f"{db}.kept"))

    result = run(spark, sql(*[statement.format(db=db) for statement in script]))

    assert not result.succeeded
    assert result.error.endswith(f"(undone: dropped the unfinished {db}.made of try 1)")
    assert rows(spark, f"{db}.kept") == [(0, "old"), (1, "old"), (2, "old")]
    assert marks(spark, f"{db}.kept") == {} and files(table_location(spark, f"{db}.kept")) == before
    assert tables(spark, db) == ["kept"] and os.listdir(db_folder(spark, db)) == ["kept"]


def test_a_replaced_table_comes_back_when_a_later_statement_fails(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.kept", "SELECT id, 'old' AS s FROM range(3)", {"made_by": "hand"})
    before = files(table_location(spark, f"{db}.kept"))

    result = run(
        spark,
        sql(
            f"CREATE OR REPLACE TABLE {db}.kept AS SELECT id, 'new' AS s FROM range(9)",
            f"CREATE TABLE {db}.copy AS SELECT * FROM {db}.kept",
            FAILING_INSERT.format(table=f"{db}.copy (id)"),
        ),
    )

    assert not result.succeeded
    assert result.output.undone == [
        f"dropped the unfinished {db}.kept of try 1",
        f"restored the replaced table {db}.kept",
        f"dropped the unfinished {db}.copy of try 1",
    ]
    assert rows(spark, f"{db}.kept") == [(0, "old"), (1, "old"), (2, "old")]
    assert props(spark, f"{db}.kept")["made_by"] == "hand" and marks(spark, f"{db}.kept") == {}
    assert files(table_location(spark, f"{db}.kept")) == before
    assert tables(spark, db) == ["kept"] and os.listdir(db_folder(spark, db)) == ["kept"]


def test_on_success_the_tables_are_kept_marked_complete_and_reported(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.totals", "SELECT id, 'old' AS s FROM range(3)")

    result = run(
        spark,
        sql(
            f"CREATE TABLE {db}.a USING parquet AS SELECT id FROM range(5)",
            f"INSERT INTO {db}.a SELECT id FROM range(5, 8)",
            f"CREATE OR REPLACE TABLE {db}.totals AS SELECT id, 'new' AS s FROM {db}.a",
            f"SELECT count(*) AS n, min(s) AS s FROM {db}.totals",
        ),
    )

    assert result.succeeded, result.error
    assert result.output.rows == [[8, "new"]]  # a later statement reads the new table under its name
    assert result.output.row_counts == {f"{db}.a": 8, f"{db}.totals": 8}
    assert result.output.undone_before == [] and result.output.swept == []
    made, replaced = result.output.ctas
    assert (made.statement, made.table, made.atomicity) == (1, f"{db}.a", "table")
    assert (made.created, made.replaced, made.format) == (True, False, "parquet")
    assert (replaced.statement, replaced.table, replaced.atomicity) == (3, f"{db}.totals", "staging")
    assert (replaced.created, replaced.replaced, replaced.rows) == (True, True, 8)
    assert replaced.bytes > 0 and replaced.location.endswith("/totals")
    assert marks(spark, f"{db}.a") == owner().properties(COMPLETE)
    target = TableIdentifier.parse(f"{db}.totals")
    assert marks(spark, f"{db}.totals") == {
        **owner().properties(COMPLETE),
        TARGET: str(target),
        REPLACED: str(replaced_table(target, owner())),
    }
    assert tables(spark, db) == ["a", "totals"] and sorted(os.listdir(db_folder(spark, db))) == ["a", "totals"]


def test_an_existing_table_under_if_not_exists_is_reported_skipped(spark: SparkSession, db: str) -> None:
    plain_table(spark, f"{db}.kept", "SELECT id, 'old' AS s FROM range(3)")

    result = run(spark, sql(f"CREATE TABLE IF NOT EXISTS {db}.kept AS SELECT 1 AS id, 'new' AS s"))

    assert result.succeeded, result.error
    assert [table.to_dict() for table in result.output.ctas] == [
        {"statement": 1, "table": f"{db}.kept", "atomicity": "table", "created": False, "skipped": "table exists"}
    ]
    assert rows(spark, f"{db}.kept") == [(0, "old"), (1, "old"), (2, "old")] and marks(spark, f"{db}.kept") == {}


def test_a_stop_between_statements_drops_the_tables_made_so_far(
    spark: SparkSession, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancellation = Cancellation()
    make = CtasTable.make

    def make_then_stop(table: CtasTable, *args: Any, **kwargs: Any) -> dict[str, Any]:
        outcome = make(table, *args, **kwargs)
        cancellation.request("the test stopped the job")  # as on_kill does: the job sees it before the next one
        return outcome

    monkeypatch.setattr(CtasTable, "make", make_then_stop)
    result = run(
        spark,
        sql(f"CREATE TABLE {db}.a AS SELECT id FROM range(5)", f"CREATE TABLE {db}.never AS SELECT 1 AS id"),
        cancellation,
    )

    assert result.error == f"cancelled: the test stopped the job (undone: dropped the unfinished {db}.a of try 1)"
    assert result.output.cleaned_up is True
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


def test_a_stop_while_a_later_statement_runs_interrupts_it_and_drops_the_tables(
    spark: SparkSession, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracker = spark.sparkContext.statusTracker()
    cancellation = Cancellation()
    cancellation.interrupt_with(spark.interruptAll)
    finished = threading.Event()
    make = CtasTable.make

    def stop_once_the_next_statement_runs(earlier_jobs: set[int]) -> None:
        if wait_until(lambda: bool(set(tracker.getActiveJobsIds()) - earlier_jobs), 120, stop=finished):
            cancellation.request("the test stopped the job")
        if not finished.wait(30):  # a safety net: never let the endless query fill the disk
            spark.sparkContext.cancelAllJobs()

    def make_then_watch(table: CtasTable, *args: Any, **kwargs: Any) -> dict[str, Any]:
        outcome = make(table, *args, **kwargs)
        earlier_jobs = set(tracker.getActiveJobsIds())  # the status lags: finished jobs may still be listed
        threading.Thread(target=stop_once_the_next_statement_runs, args=(earlier_jobs,), daemon=True).start()
        return outcome

    monkeypatch.setattr(CtasTable, "make", make_then_watch)
    try:
        result = run(
            spark,
            sql(f"CREATE TABLE {db}.a AS SELECT id FROM range(5)", f"INSERT INTO {db}.a SELECT id FROM ({SLOW_QUERY})"),
            cancellation,
        )
    finally:
        finished.set()

    assert result.error.startswith("cancelled: the test stopped the job (statement 2/2 failed: ")
    assert result.error.endswith(f"(undone: dropped the unfinished {db}.a of try 1))") and "\n" not in result.error
    # The interrupted tasks stop soon, and leave nothing behind once stopped.
    assert wait_until(lambda: no_task_running(tracker), 30), "the interrupted tasks are still running"
    assert tables(spark, db) == [] and os.listdir(db_folder(spark, db)) == []


def test_a_retry_undoes_what_a_lost_try_left_and_sweeps_other_tasks_before_the_first_statement(
    spark: SparkSession, db: str
) -> None:
    for table in ("a", "b"):  # try 1 died with both tables unfinished
        plain_table(spark, f"{db}.{table}", "SELECT id FROM range(3)", owner(1).properties(FILLING))
    other_task = owner(1, task_id="other_task")
    plain_table(spark, f"{db}.other", "SELECT id FROM range(3)", other_task.properties(FILLING))
    sweep = [CtasCleanupJob(tables=[f"{db}.other"], owner=other_task)]

    result = run(
        spark,
        sql(
            f"CREATE TABLE {db}.a AS SELECT id FROM range(5)",
            f"CREATE TABLE {db}.b AS SELECT id FROM {db}.a",
            try_number=2,
            sweep=sweep,
        ),
    )

    assert result.succeeded, result.error
    assert result.output.undone_before == [
        f"dropped the unfinished {db}.a of try 1",
        f"dropped the unfinished {db}.b of try 1",
    ]
    assert [swept.undone for swept in result.output.swept] == [[f"dropped the unfinished {db}.other of try 1"]]
    for table in ("a", "b"):
        assert rows(spark, f"{db}.{table}") == [(i,) for i in range(5)]
        assert marks(spark, f"{db}.{table}") == owner(2).properties(COMPLETE)
    assert tables(spark, db) == ["a", "b"]


def test_a_cleanup_job_puts_back_the_table_a_lost_try_s_replace_had_moved_aside(spark: SparkSession, db: str) -> None:
    """Try 1 of a SQL job replaced t (the old table moved aside, its own under the name, still filling), made u,
    and died: the cleanup job after it drops both and gives the old table its name back."""
    target = TableIdentifier.parse(f"{db}.t")
    replaced = replaced_table(target, owner())
    plain_table(spark, replaced.quoted(), "SELECT id, 'old' AS s FROM range(3)", {"made_by": "hand"})
    swapped_in = {**owner().properties(FILLING), TARGET: str(target), REPLACED: str(replaced)}
    plain_table(spark, str(target), "SELECT id, 'new' AS s FROM range(9)", swapped_in)
    plain_table(spark, f"{db}.u", "SELECT id FROM range(3)", owner().properties(FILLING))

    result = run(spark, CtasCleanupJob(tables=[str(target), f"{db}.u"], owner=owner()))

    assert result.output.undone == [
        f"dropped the unfinished {target} of try 1",
        f"restored the replaced table {target}",
        f"dropped the unfinished {db}.u of try 1",
    ]
    assert rows(spark, str(target)) == [(0, "old"), (1, "old"), (2, "old")]
    assert props(spark, str(target))["made_by"] == "hand"
    assert tables(spark, db) == ["t"] and os.listdir(db_folder(spark, db)) == ["t"]


def test_a_failure_the_provider_expects_is_one_log_line_and_any_other_its_traceback(
    spark: SparkSession, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad input and Spark's error classes say it all in their line; an unexpected error needs its stack."""
    with caplog.at_level(logging.ERROR, logger="spark_tables"):
        run_job(spark, SqlJob(statements=("SELECT * FROM no_such_table",)))
    [expected] = [record for record in caplog.records if record.name == "spark_tables"]
    assert expected.getMessage().startswith("sql job failed: statement 1/1 failed: [TABLE_OR_VIEW_NOT_FOUND]")
    assert expected.exc_info is None

    def unexpected(*args: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("spark_tables.jobs.sql.runner.run_sql", unexpected)
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="spark_tables"):
        result = run_job(spark, SqlJob(statements=("SELECT 1",)))
    [traced] = [record for record in caplog.records if record.name == "spark_tables"]
    assert result.error == "ZeroDivisionError: a bug" and traced.exc_info is not None
