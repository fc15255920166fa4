"""The sql job on a real session: tables written, row counts, the last query's rows, one-line failures."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.sql.job import SqlJob
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.entry import run_job
from spark_tables.jobs.sql.runner import StatementFailed, run_sql

pytestmark = pytest.mark.spark


def test_reports_written_tables_with_their_row_counts(spark: SparkSession) -> None:
    output = run_sql(
        spark,
        SqlJob(
            statements=(
                "CREATE DATABASE IF NOT EXISTS sqljob",
                "DROP TABLE IF EXISTS sqljob.numbers",
                "CREATE TABLE sqljob.numbers USING parquet AS SELECT id FROM range(25)",
                "INSERT INTO sqljob.numbers SELECT id FROM range(5)",
            )
        ),
        Cancellation(),
    )
    assert output["statements_run"] == 4
    assert output["tables_written"] == ["sqljob.numbers"]
    assert output["row_counts"] == {"sqljob.numbers": 30}
    assert output["rows"] == [] and output["columns"] == []


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
    assert output["columns"] == ["id", "quarter", "day"]
    assert output["rows"] == [[0, "0.00", "2026-11-20"], [1, "0.25", "2026-11-20"], [2, "0.50", "2026-11-20"]]
    assert output["rows_truncated"] is True
    assert output["tables_written"] == []


def test_only_the_last_query_is_collected(spark: SparkSession) -> None:
    output = run_sql(spark, SqlJob(statements=("SELECT 1 AS a", "SELECT 2 AS b, 3 AS c")), Cancellation())
    assert output["columns"] == ["b", "c"]
    assert output["rows"] == [[2, 3]]
    assert output["rows_truncated"] is False


def test_a_failing_statement_is_named_with_sparks_first_line(spark: SparkSession) -> None:
    with pytest.raises(StatementFailed) as failure:
        run_sql(spark, SqlJob(statements=("SELECT 1", "SELECT * FROM sqljob.no_such_table")), Cancellation())
    message = str(failure.value)
    assert message.startswith("statement 2/2 failed: [TABLE_OR_VIEW_NOT_FOUND]")
    assert "\n" not in message


def test_run_job_turns_a_failure_into_a_one_line_error_result(spark: SparkSession) -> None:
    result = run_job(spark, SqlJob(statements=("SELECT nope FROM range(1)",)))
    assert not result.succeeded
    assert result.error.startswith("statement 1/1 failed: [UNRESOLVED_COLUMN")
    assert "\n" not in result.error
    assert result.application_id == spark.sparkContext.applicationId


def test_run_job_reports_output_and_where_it_ran(spark: SparkSession) -> None:
    result = run_job(spark, SqlJob(statements=("SELECT count(*) AS n FROM range(10)",)))
    assert result.succeeded
    assert result.output["rows"] == [[10]]
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
