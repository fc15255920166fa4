"""Which operator runs each join and deduplication of a compiled plan: the compiler's choice, and a hand-edited
implementation (or TTL) refused where it cannot run the node."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.implementations import (
    SPARK_DROP_DUPLICATES,
    SPARK_STREAM_JOIN,
    TRANSFORM_WITH_STATE,
    check_deduplicate_implementation,
    check_join_implementation,
    deduplicate_implementation,
    join_implementation,
)

HOUR = 3_600_000


def test_joins_of_inserted_rows_run_on_spark_s_join_a_left_one_with_a_left_ttl() -> None:
    assert join_implementation("INNER", [True, True], 0) == SPARK_STREAM_JOIN
    assert join_implementation("LEFT", [True, True], HOUR) == SPARK_STREAM_JOIN
    # a left row without TTL never expires, and only then would Spark send it unmatched
    assert join_implementation("LEFT", [True, True], 0) == TRANSFORM_WITH_STATE
    assert join_implementation("INNER", [True, False], HOUR) == TRANSFORM_WITH_STATE
    assert join_implementation("LEFT", [False, True], HOUR) == TRANSFORM_WITH_STATE


@pytest.mark.parametrize(
    ("join_type", "insert_only", "left_ttl_ms", "message"),
    [
        ("LEFT", [True, True], 0, "node 3 (stream-exec-join): implementation spark-stream-join sends a left row that "
         "met no right row when its left TTL expires, and a left TTL of 0 ms never does: give the left side a TTL, or "
         "set its implementation to transform-with-state"),
        ("INNER", [False, True], HOUR, "node 3 (stream-exec-join): implementation spark-stream-join joins inserted "
         "rows only, but its left input updates its rows (an aggregation, a keep-last deduplication or a left join on "
         "transform-with-state): set its implementation to transform-with-state"),
        ("LEFT", [False, False], HOUR, "but its left and right inputs update their rows"),
    ],
)  # fmt: skip
def test_an_implementation_edited_onto_a_join_it_cannot_run_is_refused_in_one_line(
    join_type: str, insert_only: list[bool], left_ttl_ms: int, message: str
) -> None:
    with pytest.raises(SpecError) as raised:
        check_join_implementation(SPARK_STREAM_JOIN, join_type, insert_only, left_ttl_ms, "node 3 (stream-exec-join)")
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_spark_s_join_runs_inner_joins_without_ttl_and_transform_with_state_runs_any_join() -> None:
    check_join_implementation(SPARK_STREAM_JOIN, "INNER", [True, True], 0, "node 3")
    check_join_implementation(SPARK_STREAM_JOIN, "LEFT", [True, True], 1, "node 3")
    for join_type in ("INNER", "LEFT"):
        check_join_implementation(TRANSFORM_WITH_STATE, join_type, [False, False], 0, "node 3")


def test_a_keep_first_deduplication_of_inserted_rows_without_ttl_runs_on_spark_s_drop_duplicates() -> None:
    assert deduplicate_implementation("first", True, 0) == SPARK_DROP_DUPLICATES
    assert deduplicate_implementation("first", True, HOUR) == TRANSFORM_WITH_STATE
    assert deduplicate_implementation("last", True, 0) == TRANSFORM_WITH_STATE
    assert deduplicate_implementation("first", False, 0) == TRANSFORM_WITH_STATE
    check_deduplicate_implementation(SPARK_DROP_DUPLICATES, "first", 0, "node 2")
    for keep, ttl_ms in (("first", HOUR), ("last", 0)):
        check_deduplicate_implementation(TRANSFORM_WITH_STATE, keep, ttl_ms, "node 2")


@pytest.mark.parametrize(
    ("keep", "ttl_ms", "message"),
    [
        ("first", 20_000, "node 2 (stream-exec-deduplicate): implementation spark-drop-duplicates keeps every key for "
         "ever, but its TTL is 20000 ms: set its implementation to transform-with-state (with a new checkpoint if the "
         "plan ran), or its TTL back to 0 ms"),
        ("last", 0, "node 2 (stream-exec-deduplicate): implementation spark-drop-duplicates keeps a key's first row, "
         "not its last: set its implementation to transform-with-state"),
    ],
)  # fmt: skip
def test_a_ttl_or_keep_edited_onto_spark_s_drop_duplicates_is_refused_in_one_line(
    keep: str, ttl_ms: int, message: str
) -> None:
    with pytest.raises(SpecError) as raised:
        check_deduplicate_implementation(SPARK_DROP_DUPLICATES, keep, ttl_ms, "node 2 (stream-exec-deduplicate)")
    assert str(raised.value) == message
