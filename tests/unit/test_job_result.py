from __future__ import annotations

import json
from pathlib import PurePosixPath

import pytest

from spark_tables.core.job_result import JobResult


@pytest.mark.parametrize(
    "result",
    [
        JobResult(kind="sql"),
        JobResult(
            kind="sql",
            output={"statements_run": 2, "tables_written": ["db.t"], "rows": [[1, "a", None]]},
            application_id="local-1700000000000",
            spark_version="4.2.0",
            session_seconds=3.25,
            work_seconds=0.5,
        ),
        JobResult(kind="sql", error="[TABLE_OR_VIEW_NOT_FOUND] The table `t` cannot be found."),
    ],
)
def test_result_survives_a_json_round_trip(result):
    assert JobResult.from_json(result.to_json()) == result


def test_result_without_error_succeeded():
    assert JobResult(kind="sql", output={"x": 1}).succeeded


def test_result_with_error_did_not_succeed():
    assert not JobResult(kind="sql", error="boom").succeeded


def test_values_json_cannot_hold_are_written_as_text():
    text = JobResult(kind="sql", output={"path": PurePosixPath("/a/b")}).to_json()

    assert json.loads(text)["output"] == {"path": "/a/b"}
