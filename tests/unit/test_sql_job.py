from __future__ import annotations

import dataclasses

import pytest

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import MAX_RESULT_ROWS_LIMIT
from spark_tables.core.sql.job import SqlJob as ReadSqlJob
from spark_tables.core.sql.statement import SqlStatement
from spark_tables.tasks.sql_reader import read_statements


def SqlJob(statements, **fields) -> ReadSqlJob:
    """The job, its statements read as the operator reads them."""
    return ReadSqlJob(statements=read_statements(statements), **fields)


def _error_message(**fields) -> str:
    with pytest.raises(SpecError) as caught:
        SqlJob(**fields)
    return str(caught.value)


def test_a_list_of_statements_is_kept_as_a_tuple():
    job = SqlJob(statements=["CREATE TABLE t (a INT)", "SELECT * FROM t"])

    assert tuple(statement.text for statement in job.statements) == ("CREATE TABLE t (a INT)", "SELECT * FROM t")


def test_each_statement_comes_with_what_it_is():
    job = SqlJob(
        statements=["-- the day\nINSERT INTO db.t SELECT 1", "EXPLAIN PLAN '/p.json'", "CREATE TABLE db.c AS SELECT 1"],
        owner=_OWNER,
    )

    assert job.statements[0] == SqlStatement(
        text="-- the day\nINSERT INTO db.t SELECT 1", summary="INSERT INTO db.t SELECT 1", writes="db.t"
    )
    assert (job.statements[1].plan.action, job.statements[1].writes) == ("explain", None)
    assert (job.statements[2].ctas.table, job.statements[2].writes) == ("db.c", "db.c")


def test_a_statement_not_read_is_a_plain_statement_and_a_malformed_one_is_rejected_by_number():
    job = ReadSqlJob(statements=["CREATE TABLE db.t AS SELECT 1"])
    assert job.statements == (SqlStatement("CREATE TABLE db.t AS SELECT 1"),) and job.ctas == {}

    with pytest.raises(SpecError) as caught:
        ReadSqlJob(statements=[SqlStatement("SELECT 1"), {"sql": "SELECT 2"}])
    assert str(caught.value).startswith("sql job: statement 2 is not a read statement")


def test_max_result_rows_defaults_to_100():
    assert SqlJob(statements=("SELECT 1",)).max_result_rows == 100


def test_rows_are_counted_unless_count_rows_is_false():
    assert SqlJob(statements=("SELECT 1",)).count_rows is True
    assert SqlJob(statements=("SELECT 1",), count_rows=False).count_rows is False
    assert _error_message(statements=("SELECT 1",), count_rows="no") == (
        "sql job: count_rows='no' is invalid: use True or False"
    )


@pytest.mark.parametrize("statements", ["SELECT 1", "SELECT 1; SELECT 2", None, 5, {"SELECT 1"}])
def test_statements_that_are_not_a_list_are_rejected(statements):
    message = _error_message(statements=statements)

    assert "statements must be a list" in message
    assert "\n" not in message


@pytest.mark.parametrize("statements", [[], ()])
def test_no_statements_is_rejected(statements):
    message = _error_message(statements=statements)

    assert "no statements" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("statements", "number"),
    [
        (["SELECT 1", ""], 2),
        (["   \n\t"], 1),
        (["SELECT 1", "SELECT 2", "-- only a comment"], 3),
        (["/* only\n a comment */"], 1),
        (["-- one\n/* two */\n"], 1),
        ([None], 1),
        (["SELECT 1", 7], 2),
    ],
)
def test_empty_or_comment_only_statements_are_rejected_by_number(statements, number):
    message = _error_message(statements=statements)

    assert f"statement {number} is empty" in message
    assert "\n" not in message


@pytest.mark.parametrize("rows", [0, 1, MAX_RESULT_ROWS_LIMIT])
def test_max_result_rows_within_bounds_is_accepted(rows):
    assert SqlJob(statements=["SELECT 1"], max_result_rows=rows).max_result_rows == rows


@pytest.mark.parametrize("rows", [-1, MAX_RESULT_ROWS_LIMIT + 1, True, False, 1.0, "10", None])
def test_max_result_rows_out_of_bounds_or_not_an_int_is_rejected(rows):
    message = _error_message(statements=["SELECT 1"], max_result_rows=rows)

    assert f"max_result_rows={rows!r} is invalid" in message
    assert "\n" not in message


_OWNER = TableOwner(dag_id="sales", run_id="scheduled__2026-01-01", task_id="load", map_index=-1, try_number=2)


def test_ctas_statements_become_ctas_jobs_of_the_owner_by_statement_number():
    job = SqlJob(
        statements=[
            "CREATE TABLE db.plain (a INT) USING parquet",
            "CREATE TABLE db.a USING orc PARTITIONED BY (k) AS SELECT 1 AS v, 2 AS k",
            "INSERT INTO db.a SELECT 3, 4",
            "CREATE OR REPLACE TABLE db.b AS SELECT * FROM db.a",
        ],
        owner=_OWNER,
    )

    assert job.ctas == {
        2: CtasJob(table="db.a", owner=_OWNER, query="SELECT 1 AS v, 2 AS k", format="orc", partitioned_by=("k",)),
        4: CtasJob(table="db.b", owner=_OWNER, query="SELECT * FROM db.a", replace=True),
    }
    assert job.ctas[4].format is None and job.ctas[4].with_format("parquet").atomicity == "staging"
    assert job.owned_tables == ("db.a", "db.b")


def test_a_job_without_ctas_statements_owns_no_tables_and_needs_no_owner():
    job = SqlJob(statements=["CREATE TABLE db.t (a INT) USING parquet", "INSERT INTO db.t SELECT 1"])

    assert job.ctas == {}
    assert job.owned_tables == ()


def test_a_ctas_statement_without_an_owner_is_rejected():
    message = _error_message(statements=["SELECT 1", "CREATE TABLE db.t AS SELECT 1"])

    assert "statement 2 is a CREATE TABLE ... AS SELECT: give the job an owner" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        (
            "CREATE TABLE db.t USING parquet OPTIONS ('compression' 'zstd') AS SELECT 1",
            "OPTIONS ('compression' 'zstd')\" before AS",
        ),
        ("CREATE TABLE db.t USING iceberg AS SELECT 1", "format 'iceberg' is not supported"),
        ("CREATE TABLE db.t TBLPROPERTIES ('spark_tables.ctas.state' = 'x') AS SELECT 1", "reserved"),
    ],
)
def test_a_ctas_statement_that_cannot_run_as_a_ctas_is_rejected_by_number(statement, named):
    message = _error_message(statements=["SELECT 1", statement], owner=_OWNER)

    assert message.startswith("sql job: statement 2: ")
    assert named in message
    assert "\n" not in message


@pytest.mark.parametrize("second", ["CREATE TABLE db.t AS SELECT 2", "create or replace table DB.T as select 2"])
def test_two_ctas_statements_of_one_table_are_rejected(second):
    message = _error_message(statements=["CREATE TABLE db.t AS SELECT 1", "SELECT 1", second], owner=_OWNER)

    assert "statements 1 and 3 both create" in message
    assert "\n" not in message


def test_owner_and_sweep_survive_a_json_round_trip():
    other = {**dataclasses.asdict(_OWNER), "task_id": "other"}
    job = SqlJob(
        statements=["CREATE TABLE db.t AS SELECT 1"], owner=_OWNER, sweep=[{"tables": ["db.x"], "owner": other}]
    )

    again = JobSpec.from_json(JobSpec(job=job, result_uri="file:///r.json").to_json()).job

    assert again == job
    assert again.sweep == (CtasCleanupJob(tables=("db.x",), owner=TableOwner(**other)),)
    assert again.ctas == job.ctas
