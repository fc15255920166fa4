"""Job results: typed outputs by kind, versioned, validated when read back, in step with the job kinds and runners."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import PurePosixPath

import pytest

from spark_tables.core.aggregation.result import StreamingAggregationResult
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult, CtasTableReport, SweptClaim
from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import RESULT_KEYS, RESULT_VERSION, JobResult, xcom_fields
from spark_tables.core.kinds import KINDS
from spark_tables.core.lookup.result import LookupJoinResult, LookupReloadResult
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.sql.result import SqlResult
from spark_tables.jobs.entry import runner

#: One output of each kind, with every field a run can fill.
OUTPUTS = [
    SqlResult(
        swept=[SweptClaim(tables=["db.t"], owner={"dag_id": "d"}, undone=None)],
        undone_before=[],
        statements_run=3,
        tables_written=["db.t"],
        row_counts={"db.t": 4},
        ctas=[CtasTableReport(table="db.t", atomicity="table", statement=1, created=True, replaced=False, rows=4)],
        plans=[PlanResult(action="explain", plan_uri="file:///p.json", statement=2, explain={"nodes": []})],
        columns=["k", "v"],
        rows=[[1, "a"], [2, None]],
        rows_truncated=False,
    ),
    CtasResult(table="db.t", atomicity="staging", created=True, replaced=True, rows=4, bytes=812, swept=[]),
    CtasCleanupResult(tables=["db.t"], undone=["dropped the unfinished db.t of try 1"]),
    LookupJoinResult(lookup="customers", cache="FULL", rows=5, output=None, batches=1, metrics={}, snapshot="v1"),
    LookupReloadResult(
        lookup="customers",
        snapshot=None,
        loads=0,
        load_failures=1,
        loaded=False,
        attempts=3,
        dropped=[],
        metrics={"loadCount": 0},
    ),
    PlanResult(action="execute", plan_uri="file:///p.json", execute={"queries": []}),
    StreamingAggregationResult(query={"batches": 2}),
]


def test_each_kinds_runner_returns_its_result_and_every_result_has_an_output_here():
    for kind in KINDS:
        assert typing.get_type_hints(runner(kind))["return"] is KINDS[kind].result, kind
    assert {type(output) for output in OUTPUTS} == {kind.result for kind in KINDS.values()}


@pytest.mark.parametrize("output", OUTPUTS, ids=lambda output: output.kind)
def test_each_kinds_output_survives_a_json_round_trip(output):
    result = JobResult(kind=output.kind, output=output, application_id="local-1", session_seconds=3.25)

    assert JobResult.from_json(result.to_json()) == result
    assert type(output).from_dict(json.loads(json.dumps(output.to_dict()))) == output


@pytest.mark.parametrize(
    "result",
    [
        JobResult(kind="sql"),
        JobResult(kind="sql", error="[TABLE_OR_VIEW_NOT_FOUND] The table `t` cannot be found."),
        JobResult(kind="ctas", output=CtasResult(table="db.t", atomicity="table", undone=[], cleaned_up=True)),
    ],
)
def test_result_survives_a_json_round_trip(result):
    assert JobResult.from_json(result.to_json()) == result


def test_a_field_left_none_is_left_out_unless_its_kind_keeps_it():
    assert CtasResult(table="db.t", atomicity="table", created=False, skipped="table exists").to_dict() == {
        "table": "db.t",
        "atomicity": "table",
        "created": False,
        "skipped": "table exists",
        "swept": [],
    }
    assert LookupJoinResult(lookup="c", cache="NONE", rows=1, output=None, batches=1, metrics={}).to_dict() == {
        "lookup": "c",
        "cache": "NONE",
        "rows": 1,
        "output": None,
        "batches": 1,
        "metrics": {},
        "worker_metrics": [],
    }


def test_the_xcom_carries_the_kind_and_version():
    output = CtasCleanupResult(tables=["db.t"], undone=[])

    assert xcom_fields("ctas_cleanup", output) == {
        "kind": "ctas_cleanup",
        "version": RESULT_VERSION,
        "tables": ["db.t"],
        "undone": [],
        "cleaned_up": True,
    }
    assert JobResult(kind="ctas_cleanup", output=output).output_fields() == xcom_fields("ctas_cleanup", output)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_no_kinds_output_has_a_field_named_as_the_xcoms_kind_or_version(name):
    """The XCom's ``kind`` and ``version`` say what the value is (the monitoring pages read them): an output's field
    of either name would overwrite it (a Delta CTAS's table version 0 once hid its table from the run tab)."""
    fields = {field.name for field in dataclasses.fields(KINDS[name].result)}

    assert not fields & set(RESULT_KEYS), f"{KINDS[name].result.__name__} has a field of the XCom's own"


def test_result_without_error_succeeded():
    assert JobResult(kind="sql", output=SqlResult(statements_run=1)).succeeded


def test_result_with_error_did_not_succeed():
    assert not JobResult(kind="sql", error="boom").succeeded


def test_values_json_cannot_hold_are_written_as_text():
    text = JobResult(kind="sql", output=SqlResult(rows=[[PurePosixPath("/a/b")]])).to_json()

    assert json.loads(text)["output"] == {"swept": [], "rows": [["/a/b"]]}


def test_an_output_of_another_kind_is_refused():
    with pytest.raises(SpecError, match=r"^ctas job result: its output is a SqlResult, not a CtasResult$"):
        JobResult(kind="ctas", output=SqlResult())


@pytest.mark.parametrize(
    ("document", "line"),
    [
        ({"kind": "sql", "output": None}, "job result version None is not 1: the driver is of another release"),
        ({"version": 1, "kind": "spark", "output": None}, "unknown job kind 'spark' in a job result: use one of"),
        (
            {"version": 1, "kind": "ctas", "output": {"table": "db.t"}},
            "ctas job result: missing field(s) ['atomicity']",
        ),
        (
            {"version": 1, "kind": "sql", "output": {"statements": 1}},
            "sql job result: unknown field(s) ['statements']: the provider that wrote it is newer; upgrade",
        ),
        (
            {"version": 1, "kind": "sql", "output": {"statements_run": "3"}},
            "sql job result: statements_run must be int, not '3'",
        ),
        (
            {"version": 1, "kind": "sql", "output": {"rows_truncated": 1}},
            "sql job result: rows_truncated must be bool, not 1",
        ),
        (
            {"version": 1, "kind": "sql", "output": {"ctas": [{"table": "db.t", "atomicity": "table", "rows": True}]}},
            "sql job result: ctas: rows must be int, not True",
        ),
        (
            {"version": 1, "kind": "lookup_reload", "output": {**OUTPUTS[4].to_dict(), "dropped": "v1"}},
            "lookup_reload job result: dropped must be list[str], not 'v1'",
        ),
    ],
)
def test_a_result_that_cannot_be_read_fails_with_one_line(document, line):
    with pytest.raises(SpecError) as raised:
        JobResult.from_json(json.dumps(document))

    assert str(raised.value).startswith(line) and "\n" not in str(raised.value)
