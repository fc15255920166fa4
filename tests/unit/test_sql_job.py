from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.sql.job import MAX_RESULT_ROWS_LIMIT, SqlJob


def _error_message(**fields) -> str:
    with pytest.raises(SpecError) as caught:
        SqlJob(**fields)
    return str(caught.value)


def test_a_list_of_statements_is_kept_as_a_tuple():
    job = SqlJob(statements=["CREATE TABLE t (a INT)", "SELECT * FROM t"])

    assert job.statements == ("CREATE TABLE t (a INT)", "SELECT * FROM t")


def test_max_result_rows_defaults_to_100():
    assert SqlJob(statements=("SELECT 1",)).max_result_rows == 100


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
