"""An inner or left equi-join of two insert-only streams with a state TTL per side, on Spark's stream-stream join.

Flink's TTL for a row that is written once (an insert): it lives ``ttl`` after it came, so two rows of the sides
meet when each came while the other lived. As a join condition over each side's processing-time column (the
micro-batch's time, ``time_column``): ``r.rpt < l.lpt + <left TTL> AND l.lpt < r.rpt + <right TTL>``, strict as
``StateTtl.expired`` is (a row has expired once ``now - written >= ttl``). With a watermark on both columns Spark
takes the condition as each side's bound and drops a side's rows from its state once the watermark passes it;
a side whose TTL is ``0 ms`` gets no bound, and its rows stay. Where neither side has a bound, a condition that holds
for every pair (``lpt <= rpt OR rpt <= lpt``) keeps both columns in the state all the same, so that the state's
schema is the same whatever the TTLs: Spark resumes a query from its checkpoint after any TTL edit (seen on Spark
4.2: 4 s to 60 s, 4 s to 0, 0 to 4 s, both 0 to 4 s and 30 s, and back).

The TTL is a parameter of the condition, not of the state, so an edited TTL applies to the rows already kept, as on
transform-with-state; rows a shorter TTL let Spark drop are gone.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.implementations import LEFT_JOIN_NEEDS_LEFT_TTL
from spark_tables.jobs.changelog import INSERT, ROW_KIND, quoted
from spark_tables.jobs.plan.join import join_fields
from spark_tables.jobs.streaming.clock import Clock, time_column
from spark_tables.jobs.streaming.state_ttl import StateTtl

#: Each side's processing-time column, kept in its state.
LEFT_TIME, RIGHT_TIME = "__join_left_time", "__join_right_time"
#: The watermark delay of both time columns. A row's time is its batch's, at or after every earlier batch's, but
#: Spark drops as late a row at or below the watermark its batch before evicted by (the time of the batch before
#: that, less the delay). With a delay, the rows of batches that all have one time (a fixed clock's) are kept, and
#: so are those of a batch after the system clock stepped back by less than the delay; what Spark drops, the plan's
#: report counts and the task log warns of. A side's rows leave the state that much later; what meets what is the
#: join condition's alone.
WATERMARK_DELAY = "1 second"


def spark_join(
    left: DataFrame,
    right: DataFrame,
    *,
    left_key: Sequence[str],
    right_key: Sequence[str],
    left_ttl_ms: int,
    right_ttl_ms: int,
    clock: Clock,
    kind: str = "inner",
) -> DataFrame:
    """``left INNER JOIN right ON left_key = right_key`` (or ``kind="left"``: ``LEFT JOIN``) over two insert-only
    changelogs, as an insert-only one: the left columns, then the right ones (their names must differ).

    A left join sends a left row's null-padded row once, when the row expires unmatched, so
    it needs a left TTL; the query must run no-data micro-batches for it to be sent without waiting for data."""
    left_fields, right_fields = join_fields(left, right, left_key, right_key)
    left_ttl = StateTtl.of(left_ttl_ms, "join left_ttl_ms")
    right_ttl = StateTtl.of(right_ttl_ms, "join right_ttl_ms")
    if kind not in ("inner", "left"):
        raise SpecError(f"join kind {kind!r} is invalid: use inner or left")
    if kind == "left" and not left_ttl.expires:
        raise SpecError(f"a left join: {LEFT_JOIN_NEEDS_LEFT_TTL}: give left_ttl_ms")
    timed_left = left.drop(ROW_KIND).withColumn(LEFT_TIME, time_column(clock)).withWatermark(LEFT_TIME, WATERMARK_DELAY)
    timed_right = (
        right.drop(ROW_KIND).withColumn(RIGHT_TIME, time_column(clock)).withWatermark(RIGHT_TIME, WATERMARK_DELAY)
    )
    left_time, right_time = quoted(LEFT_TIME), quoted(RIGHT_TIME)
    condition = [quoted(a) == quoted(b) for a, b in zip(left_key, right_key, strict=True)]
    condition += _bounds(left_time, right_time, left_ttl, right_ttl)
    joined = timed_left.join(timed_right, _all(condition), "left_outer" if kind == "left" else "inner")
    return joined.select(
        *(quoted(field.name) for field in left_fields + right_fields), F.lit(INSERT).cast(ByteType()).alias(ROW_KIND)
    )


def _bounds(left_time: Column, right_time: Column, left_ttl: StateTtl, right_ttl: StateTtl) -> list[Column]:
    """The time conditions: a right row meets a left one while it lives, and the other way round."""
    bounds = []
    if left_ttl.expires:
        bounds.append(right_time < left_time + _interval(left_ttl.ttl_ms))
    if right_ttl.expires:
        bounds.append(left_time < right_time + _interval(right_ttl.ttl_ms))
    return bounds or [(left_time <= right_time) | (right_time <= left_time)]


def _interval(milliseconds: int) -> Column:
    return F.expr(f"INTERVAL {milliseconds} MILLISECONDS")


def _all(conditions: list[Column]) -> Column:
    combined = conditions[0]
    for condition in conditions[1:]:
        combined = combined & condition
    return combined
