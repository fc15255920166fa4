"""A sink query's checkpoint records its nodes' implementations; a plan that would run a node elsewhere, or a
checkpoint holding Spark's offsets without the record, is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.jobs.plan.checkpoint_implementations import (
    IMPLEMENTATIONS_FILE,
    check_implementations,
    record_implementations,
    recorded_implementations,
)
from tests.unit.test_plan_document import example_2


def _plan(implementation: str) -> CompiledPlan:
    """FLIP-292's Example 2 with its join (node 3) on ``implementation``, counted (node 4) into sink node 5."""
    document = example_2()
    document["nodes"][2]["implementation"] = implementation
    return CompiledPlan.from_dict(document)


def test_a_checkpoint_never_run_has_no_record_and_checks_nothing(tmp_path: Path) -> None:
    assert recorded_implementations(str(tmp_path / "sink-5")) is None
    plan = _plan("spark-stream-join")
    check_implementations(plan, plan.node(5), str(tmp_path / "sink-5"))


def test_the_record_names_each_stateful_node_and_a_moved_node_is_refused(tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "sink-5")
    before = _plan("spark-stream-join")
    record_implementations(before, before.node(5), checkpoint)
    assert recorded_implementations(checkpoint) == {3: "spark-stream-join", 4: "transform-with-state"}
    check_implementations(before, before.node(5), checkpoint)
    moved = _plan("transform-with-state")
    with pytest.raises(SpecError) as raised:
        check_implementations(moved, moved.node(5), checkpoint)
    assert str(raised.value) == (
        f"node 3 (stream-exec-join) would run on transform-with-state, but checkpoint {checkpoint} holds its state as "
        "spark-stream-join keeps it, which transform-with-state cannot read: run the plan as compiled before "
        "(implementation spark-stream-join), or execute it with a new checkpoint folder"
    )


def test_a_checkpoint_with_offsets_but_no_record_is_refused(tmp_path: Path) -> None:
    checkpoint = tmp_path / "sink-5"
    (checkpoint / "offsets").mkdir(parents=True)
    plan = _plan("transform-with-state")
    with pytest.raises(SpecError) as raised:
        check_implementations(plan, plan.node(5), str(checkpoint))
    assert str(raised.value) == (
        f"checkpoint {checkpoint} holds a query's offsets but no {IMPLEMENTATIONS_FILE}: it was not written by "
        "EXECUTE PLAN; execute the plan with a new checkpoint folder"
    )
