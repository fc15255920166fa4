"""Which commit made a Delta table for a task, read from its file in the table's log (``making_commit``): the
first commit, or the one after the version a replace replaced, and only when it is the task's try's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_tables.core.ctas.ownership import REPLACED_VERSION, TableOwner
from spark_tables.jobs.table_format.delta import making_commit

OWNER = TableOwner(dag_id="lake", run_id="manual__1", task_id="make", try_number=2)
METRICS = {"numOutputRows": "40", "numOutputBytes": "1200", "numFiles": "2"}


def _commit(folder: Path, version: int, operation: str, made_by: TableOwner, metrics: dict[str, str] = METRICS) -> None:
    """A commit file as Delta writes one: the commit info first, then its actions."""
    log = folder / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    parameters = {"isManaged": "true", "properties": json.dumps(made_by.properties("complete"))}
    info = {"commitInfo": {"operation": operation, "operationParameters": parameters, "operationMetrics": metrics}}
    actions = [info, {"protocol": {"minReaderVersion": 1}}, {"add": {"path": "part-0.parquet"}}]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(action) for action in actions) + "\n")


def test_a_new_table_s_making_commit_is_its_first(tmp_path: Path) -> None:
    _commit(tmp_path, 0, "CREATE TABLE AS SELECT", OWNER)

    assert making_commit(f"file:{tmp_path}", OWNER, OWNER.properties("complete")) == (0, METRICS)


def test_a_replace_s_making_commit_follows_the_version_it_replaced(tmp_path: Path) -> None:
    other = TableOwner(dag_id="lake", run_id="manual__0", task_id="other")
    _commit(tmp_path, 3, "CREATE TABLE AS SELECT", other, {"numOutputRows": "9"})
    _commit(tmp_path, 4, "REPLACE TABLE AS SELECT", OWNER)

    marks = {**OWNER.properties("complete"), REPLACED_VERSION: "3"}
    assert making_commit(str(tmp_path), OWNER, marks) == (4, METRICS)


@pytest.mark.parametrize(
    ("operation", "made_by"),
    [
        ("WRITE", OWNER),  # another operation took that version
        ("CREATE TABLE AS SELECT", TableOwner(dag_id="lake", run_id="manual__1", task_id="other")),
        ("CREATE TABLE AS SELECT", TableOwner(dag_id="lake", run_id="manual__1", task_id="make", try_number=1)),
    ],
    ids=["another_operation", "another_task", "another_try"],
)
def test_a_commit_that_is_not_the_try_s_making_one_says_nothing(tmp_path: Path, operation, made_by) -> None:
    _commit(tmp_path, 0, operation, made_by)

    assert making_commit(str(tmp_path), OWNER, OWNER.properties("complete")) is None


def test_without_its_file_or_the_task_s_marks_the_history_has_to_say(tmp_path: Path) -> None:
    assert making_commit(str(tmp_path), OWNER, OWNER.properties("complete")) is None, "no log file"
    _commit(tmp_path, 0, "CREATE TABLE AS SELECT", OWNER)
    assert making_commit(str(tmp_path), OWNER, {}) is None, "a table without the task's marks"
    assert making_commit(None, OWNER, OWNER.properties("complete")) is None, "no location"
