"""Which operator runs each stateful node of a compiled plan: Spark's own, where it gives FLIP-292's results, else
the provider's transform-with-state operators.

- ``spark-stream-join``: Spark's stream-stream join. Each side gets a processing-time column (the micro-batch's
  time) with a watermark a second behind it, and the join condition bounds each side by its TTL:
  ``r.rpt < l.lpt + <left TTL> AND l.lpt < r.rpt + <right TTL>`` (a side of ``0 ms`` gets no bound: its rows never
  expire). A row of one side
  meets a row of the other only while it lives, as in Flink (update type OnCreateAndWrite: an inserted row is
  written once), and Spark removes a side's rows from its state once the watermark passes their TTL. It runs an
  inner join of two insert-only inputs, which is then insert-only too.
- ``transform-with-state``: the provider's Python operators (``jobs/plan/join.py``, ``deduplicate.py``,
  ``group_aggregate.py``): every node kind, changelogs that update, keep-last, aggregations.

The compiler writes the runner into each join node (node version 2); a join of version 1, compiled before runners
existed, runs on transform-with-state as it did. A sink's query records its nodes' runners in its checkpoint, and a
plan that would run a node on another runner than its checkpoint's state was written by is refused: the two keep
different state.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_tables.core.errors import SpecError

SPARK_STREAM_JOIN = "spark-stream-join"
TRANSFORM_WITH_STATE = "transform-with-state"
#: The runners a join node may name.
JOIN_RUNNERS = (SPARK_STREAM_JOIN, TRANSFORM_WITH_STATE)


def join_runner(join_type: str, inputs_insert_only: Sequence[bool]) -> str:
    """The runner the compiler chooses for a join: Spark's for an inner join of insert-only inputs."""
    if join_type == "INNER" and all(inputs_insert_only):
        return SPARK_STREAM_JOIN
    return TRANSFORM_WITH_STATE


def check_join_runner(runner: str, join_type: str, inputs_insert_only: Sequence[bool], where: str) -> None:
    """``SpecError`` when ``runner`` cannot run this join (a plan edited by hand)."""
    if runner != SPARK_STREAM_JOIN:
        return
    if join_type != "INNER":
        raise SpecError(
            f"{where}: runner {SPARK_STREAM_JOIN} runs inner joins only, not a {join_type} join: set its runner "
            f"to {TRANSFORM_WITH_STATE}"
        )
    updating = [index for index, insert_only in enumerate(inputs_insert_only) if not insert_only]
    if updating:
        inputs = (
            "left and right inputs update their"
            if len(updating) == 2
            else f"{('left', 'right')[updating[0]]} input updates its"
        )
        raise SpecError(
            f"{where}: runner {SPARK_STREAM_JOIN} joins inserted rows only, but its {inputs} rows (an aggregation, "
            f"a keep-last deduplication or a left join): set its runner to {TRANSFORM_WITH_STATE}"
        )
