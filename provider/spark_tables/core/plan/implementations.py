"""A stateful node's implementation: the Spark operator that runs it, Spark's own where it gives FLIP-292's
results, else the provider's transform-with-state operators.

- ``spark-stream-join``: Spark's stream-stream join. Each side gets a processing-time column (the micro-batch's
  time) with a watermark a second behind it, and the join condition bounds each side by its TTL:
  ``r.rpt < l.lpt + <left TTL> AND l.lpt < r.rpt + <right TTL>`` (a side of ``0 ms`` gets no bound: its rows never
  expire). A row of one side
  meets a row of the other only while it lives, as in Flink (update type OnCreateAndWrite: an inserted row is
  written once), and Spark removes a side's rows from its state once the watermark passes their TTL. It runs an
  inner join of two insert-only inputs, and a left join of two whose left side has a TTL; both are then insert-only.
  A left join sends a left row's null-padded row once, when the row expires without having met a right row
  (Flink sends it at once, and retracts it when a right row comes): so the left side needs a TTL, and the sink's
  query runs Spark's no-data micro-batches, in which the watermark moves on without new rows.
- ``spark-drop-duplicates``: Spark's streaming ``dropDuplicates`` over the key, which keeps every key for ever: a
  keep-first deduplication of insert-only input with a TTL of ``0 ms`` (Flink's keep-first result: a key's first
  row, then nothing). With a TTL it cannot run (its state holds no write times, so a TTL cannot be edited in later
  either), and Spark's ``dropDuplicatesWithinWatermark`` decides with the watermark of the batch before, which
  drops a key's row that came back after its TTL: not Flink's result.
- ``transform-with-state``: the provider's Python operators (``jobs/plan/join.py``, ``deduplicate.py``,
  ``group_aggregate.py``): every node kind, changelogs that update, keep-last, aggregations.

The compiler writes the implementation into each join and deduplication node, from the node's kind, its inputs'
changelogs and its TTLs as compiled; a TTL edited later that the implementation cannot take is refused in one line
(at EXPLAIN and EXECUTE), naming the implementation to set. A sink's query records its nodes' implementations in its
checkpoint, and a plan that would run a node on another implementation than its checkpoint's state was written by is
refused: the two keep different state.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_tables.core.errors import SpecError

SPARK_STREAM_JOIN = "spark-stream-join"
SPARK_DROP_DUPLICATES = "spark-drop-duplicates"
TRANSFORM_WITH_STATE = "transform-with-state"
#: Why a left join on Spark's join needs a TTL on its left side.
LEFT_JOIN_NEEDS_LEFT_TTL = (
    f"implementation {SPARK_STREAM_JOIN} sends a left row that met no right row when its left TTL expires, and a "
    "left TTL of 0 ms never does"
)
#: The implementations a join node may name.
JOIN_IMPLEMENTATIONS = (SPARK_STREAM_JOIN, TRANSFORM_WITH_STATE)
#: The implementations a deduplication node may name.
DEDUPLICATE_IMPLEMENTATIONS = (SPARK_DROP_DUPLICATES, TRANSFORM_WITH_STATE)


def join_implementation(join_type: str, inputs_insert_only: Sequence[bool], left_ttl_ms: int) -> str:
    """The implementation the compiler chooses for a join: Spark's for an inner join of insert-only inputs, and for a
    left join of insert-only inputs whose left side has a TTL."""
    if all(inputs_insert_only) and (join_type == "INNER" or left_ttl_ms > 0):
        return SPARK_STREAM_JOIN
    return TRANSFORM_WITH_STATE


def check_join_implementation(
    implementation: str, join_type: str, inputs_insert_only: Sequence[bool], left_ttl_ms: int, where: str
) -> None:
    """``SpecError`` when ``implementation`` cannot run this join (a plan edited by hand: its implementation, or a
    left TTL)."""
    if implementation != SPARK_STREAM_JOIN:
        return
    if join_type == "LEFT" and left_ttl_ms <= 0:
        raise SpecError(
            f"{where}: {LEFT_JOIN_NEEDS_LEFT_TTL}: give the left side a TTL, or set its implementation to "
            f"{TRANSFORM_WITH_STATE}"
        )
    updating = [index for index, insert_only in enumerate(inputs_insert_only) if not insert_only]
    if updating:
        inputs = (
            "left and right inputs update their"
            if len(updating) == 2
            else f"{('left', 'right')[updating[0]]} input updates its"
        )
        raise SpecError(
            f"{where}: implementation {SPARK_STREAM_JOIN} joins inserted rows only, but its {inputs} rows (an "
            f"aggregation, a keep-last deduplication or a left join on {TRANSFORM_WITH_STATE}): set its implementation "
            f"to {TRANSFORM_WITH_STATE}"
        )


def deduplicate_implementation(keep: str, input_insert_only: bool, ttl_ms: int) -> str:
    """The implementation the compiler chooses for a deduplication: Spark's for keep-first of insert-only input
    without TTL."""
    if keep == "first" and input_insert_only and ttl_ms == 0:
        return SPARK_DROP_DUPLICATES
    return TRANSFORM_WITH_STATE


def check_deduplicate_implementation(implementation: str, keep: str, ttl_ms: int, where: str) -> None:
    """``SpecError`` when ``implementation`` cannot run this deduplication (a plan edited by hand: its
    implementation, its keep or its TTL). Its input must insert only on either implementation, which the pipeline
    checks."""
    if implementation != SPARK_DROP_DUPLICATES:
        return
    if keep != "first":
        raise SpecError(
            f"{where}: implementation {SPARK_DROP_DUPLICATES} keeps a key's first row, not its last: set its "
            f"implementation to {TRANSFORM_WITH_STATE}"
        )
    if ttl_ms != 0:
        raise SpecError(
            f"{where}: implementation {SPARK_DROP_DUPLICATES} keeps every key for ever, but its TTL is {ttl_ms} ms: "
            f"set its implementation to {TRANSFORM_WITH_STATE} (with a new checkpoint if the plan ran), or its TTL "
            "back to 0 ms"
        )
