"""Which operator runs each join of a compiled plan: the compiler's choice, and a hand-edited runner refused where
it cannot run the join."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.runners import SPARK_STREAM_JOIN, TRANSFORM_WITH_STATE, check_join_runner, join_runner


def test_an_inner_join_of_inserted_rows_runs_on_spark_s_join_and_every_other_on_transform_with_state() -> None:
    assert join_runner("INNER", [True, True]) == SPARK_STREAM_JOIN
    assert join_runner("INNER", [True, False]) == TRANSFORM_WITH_STATE
    assert join_runner("LEFT", [True, True]) == TRANSFORM_WITH_STATE


@pytest.mark.parametrize(
    ("join_type", "insert_only", "message"),
    [
        ("LEFT", [True, True], "node 3 (stream-exec-join): runner spark-stream-join runs inner joins only, not a LEFT "
         "join: set its runner to transform-with-state"),
        ("INNER", [False, True], "node 3 (stream-exec-join): runner spark-stream-join joins inserted rows only, but "
         "its left input updates its rows (an aggregation, a keep-last deduplication or a left join): set its runner "
         "to transform-with-state"),
        ("INNER", [False, False], "but its left and right inputs update their rows"),
    ],
)  # fmt: skip
def test_a_runner_edited_onto_a_join_it_cannot_run_is_refused_in_one_line(
    join_type: str, insert_only: list[bool], message: str
) -> None:
    with pytest.raises(SpecError) as raised:
        check_join_runner(SPARK_STREAM_JOIN, join_type, insert_only, "node 3 (stream-exec-join)")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_transform_with_state_runs_any_join() -> None:
    for join_type in ("INNER", "LEFT"):
        check_join_runner(TRANSFORM_WITH_STATE, join_type, [False, False], "node 3")
