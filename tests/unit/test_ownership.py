"""TableOwner: the marks a CTAS leaves on its tables, how a retry recognises them, and the names it derives."""

from __future__ import annotations

import dataclasses
import re

import pytest

from spark_tables.core.ctas.ownership import (
    COMPLETE,
    FILLING,
    PREFIX,
    STATE,
    TableOwner,
    owner_try,
    replaced_table,
    staging_table,
)
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier

_OWNER = TableOwner(dag_id="sales", run_id="scheduled__2026-01-01", task_id="load", map_index=2, try_number=3)


def test_properties_mark_the_task_the_try_and_the_state():
    assert _OWNER.properties(FILLING) == {
        "spark_tables.ctas.dag_id": "sales",
        "spark_tables.ctas.run_id": "scheduled__2026-01-01",
        "spark_tables.ctas.task_id": "load",
        "spark_tables.ctas.map_index": "2",
        "spark_tables.ctas.try_number": "3",
        "spark_tables.ctas.state": "filling",
    }


def test_every_mark_carries_the_prefix():
    assert all(key.startswith(PREFIX) for key in _OWNER.properties(COMPLETE))
    assert _OWNER.properties(COMPLETE)[STATE] == "complete"


def test_an_unmapped_task_marks_map_index_minus_one():
    owner = TableOwner(dag_id="d", run_id="r", task_id="t")

    assert owner.properties(FILLING)[PREFIX + "map_index"] == "-1"
    assert owner.properties(FILLING)[PREFIX + "try_number"] == "1"


def test_the_same_try_recognises_its_own_table():
    assert _OWNER.is_same_task(_OWNER.properties(FILLING)) is True


@pytest.mark.parametrize("try_number", [1, 2, 4])
def test_another_try_of_the_same_task_is_the_same_task(try_number):
    earlier = dataclasses.replace(_OWNER, try_number=try_number)

    assert _OWNER.is_same_task(earlier.properties(COMPLETE)) is True


@pytest.mark.parametrize(
    "change",
    [{"run_id": "manual__2026-01-02"}, {"dag_id": "other"}, {"task_id": "other"}, {"map_index": -1}, {"map_index": 3}],
)
def test_another_run_dag_task_or_map_index_is_not_the_same_task(change):
    other = dataclasses.replace(_OWNER, **change)

    assert _OWNER.is_same_task(other.properties(FILLING)) is False


def test_a_table_without_marks_is_not_the_same_task():
    assert _OWNER.is_same_task({}) is False
    assert _OWNER.is_same_task({"owner.team": "finance"}) is False


@pytest.mark.parametrize("missing", ["dag_id", "run_id", "task_id", "map_index"])
def test_a_table_missing_one_identity_mark_is_not_the_same_task(missing):
    marks = _OWNER.properties(FILLING)
    del marks[PREFIX + missing]

    assert _OWNER.is_same_task(marks) is False


def test_a_table_without_a_try_mark_is_still_the_same_task():
    marks = _OWNER.properties(FILLING)
    del marks[PREFIX + "try_number"]

    assert _OWNER.is_same_task(marks) is True


def test_task_digest_is_ten_hex_digits_the_same_for_every_try():
    digests = {dataclasses.replace(_OWNER, try_number=n).task_digest() for n in (1, 2, 3, 10)}

    assert len(digests) == 1
    assert re.fullmatch(r"[0-9a-f]{10}", digests.pop())


@pytest.mark.parametrize(
    "change", [{"run_id": "manual__2026-01-02"}, {"dag_id": "other"}, {"task_id": "other"}, {"map_index": 3}]
)
def test_task_digest_differs_between_runs_and_tasks(change):
    assert dataclasses.replace(_OWNER, **change).task_digest() != _OWNER.task_digest()


@pytest.mark.parametrize("name_for", [staging_table, replaced_table])
@pytest.mark.parametrize("target", [("t",), ("db", "t"), ("cat", "db", "t")])
def test_derived_tables_keep_the_catalog_and_database(name_for, target):
    derived = name_for(TableIdentifier(target), _OWNER)

    assert derived.parts[:-1] == target[:-1]
    assert derived.table.startswith("t__")
    assert derived != TableIdentifier(target)


def test_staging_and_replaced_tables_differ_from_each_other():
    target = TableIdentifier(("db", "t"))

    assert staging_table(target, _OWNER) == TableIdentifier(("db", f"t__staging_{_OWNER.task_digest()}"))
    assert replaced_table(target, _OWNER) == TableIdentifier(("db", f"t__replaced_{_OWNER.task_digest()}"))
    assert staging_table(target, _OWNER) != replaced_table(target, _OWNER)


def test_derived_tables_are_the_same_for_a_retry_and_differ_for_another_run():
    target = TableIdentifier(("db", "t"))
    retry = dataclasses.replace(_OWNER, try_number=4)
    other_run = dataclasses.replace(_OWNER, run_id="manual__2026-01-02")

    assert staging_table(target, retry) == staging_table(target, _OWNER)
    assert replaced_table(target, retry) == replaced_table(target, _OWNER)
    assert staging_table(target, other_run) != staging_table(target, _OWNER)


def test_describe_names_the_task_the_map_index_and_the_try():
    assert _OWNER.describe() == "sales.load[2] of run scheduled__2026-01-01, try 3"
    assert dataclasses.replace(_OWNER, map_index=-1).describe() == "sales.load of run scheduled__2026-01-01, try 3"


def test_owner_try_reads_the_try_mark():
    assert owner_try(_OWNER.properties(FILLING)) == "3"
    assert owner_try({}) == "?"


def test_from_dict_builds_an_owner_and_keeps_one():
    assert TableOwner.from_dict(dataclasses.asdict(_OWNER)) == _OWNER
    assert TableOwner.from_dict(_OWNER) is _OWNER


@pytest.mark.parametrize("data", [None, "sales.load", ["sales"], 5])
def test_from_dict_rejects_what_is_not_an_object(data):
    with pytest.raises(SpecError, match="owner must be an object"):
        TableOwner.from_dict(data)


@pytest.mark.parametrize("name", ["dag_id", "run_id", "task_id"])
@pytest.mark.parametrize("value", ["", None, 5])
def test_owner_names_must_be_non_empty_strings(name, value):
    with pytest.raises(SpecError, match=f"owner {name} must be a non-empty string"):
        dataclasses.replace(_OWNER, **{name: value})


@pytest.mark.parametrize("name", ["map_index", "try_number"])
@pytest.mark.parametrize("value", ["1", 1.0, None, True])
def test_owner_numbers_must_be_whole_numbers(name, value):
    with pytest.raises(SpecError, match=f"owner {name} must be a whole number") as caught:
        dataclasses.replace(_OWNER, **{name: value})

    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"dag_id": "sales"},
        {"dag_id": "sales", "run_id": "r"},
        {"run_id": "r", "task_id": "t", "map_index": 1, "try_number": 1},
    ],
)
def test_from_dict_rejects_missing_identity_keys_as_a_spec_error(data):
    with pytest.raises(SpecError, match="owner must be an object with dag_id, run_id, task_id") as caught:
        TableOwner.from_dict(data)

    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("extra", [{"pool": "default"}, {"state": "running"}, {"try": 1}])
def test_from_dict_rejects_unknown_keys_as_a_spec_error(extra):
    with pytest.raises(SpecError, match="owner must be an object"):
        TableOwner.from_dict({**dataclasses.asdict(_OWNER), **extra})


def test_from_dict_defaults_map_index_and_try_number():
    owner = TableOwner.from_dict({"dag_id": "d", "run_id": "r", "task_id": "t"})

    assert owner == TableOwner(dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1)


def test_from_dict_still_checks_the_values():
    with pytest.raises(SpecError, match="owner map_index must be a whole number"):
        TableOwner.from_dict({"dag_id": "d", "run_id": "r", "task_id": "t", "map_index": "2"})
