"""The buffer between an aggregation and its sink: the latest change of each sink key, flushed at most once per
interval (FLIP-365's ``BufferOutput``).

Spark hands a transform-with-state operator one grouping key at a time, and a flush must reach every buffered key
at once, so the buffer is keyed by bucket (``BUCKETS`` buckets of the sink key's hash), each bucket's changes in a
map state by sink key: a micro-batch writes each changed key once (its last change; an update's -U is left out,
as the upsert sink leaves it out), and a flush emits the bucket's map and clears it, in the batch that commits the
state. A flush comes:

- on the interval: at the first micro-batch at or after the end of the ``max_interval`` window (windows aligned
  to the epoch, so every bucket flushes in the same batch) in which the bucket's first buffered change fell,
  before that batch's changes, which fall in the next window; a bucket without rows in that batch is reached by
  its processing-time timer;
- on request: a flush request (``flush_requests``) sends one row to every bucket, when the input has nothing available
  and at the end of the input; the request's batch's changes go out with it.

A batch flushes a bucket once at most: when a request comes in the batch that ends a window, the batch's changes
go out with the rest, under the request's cause. Every emitted row carries its flush's cause (``FLUSH_CAUSE``), for
the run's counts, which the sink never sees, and its place in the flush (``EMIT_ORDER``): FLIP-365 emits the records
at or below the current watermark first, then those above it. A record's time is its event-time column's, the
column Spark marks with the watermark's delay (a grouping column the ``WATERMARK`` clause names, or a ``window``,
whose end counts); without one, a flush has no order.
Whether a window has ended is the operator clock's decision (a test's fixed clock); the timer only wakes the
bucket.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import ByteType, IntegerType, LongType, StringType, StructField, StructType

from spark_tables.core.errors import SpecError
from spark_tables.jobs.changelog import (
    EMIT_ORDER,
    ROW_KIND,
    UPDATE_BEFORE,
    column_indexes,
    data_fields,
    quoted,
)
from spark_tables.jobs.streaming.clock import Clock, checked_clock
from spark_tables.jobs.streaming.state_ttl import state_reader, transform

#: How many buckets the buffer's state is kept in: part of the state's layout, fixed for a checkpoint's life.
BUCKETS = 16
#: The column of a bucket's number, on the buffer's input.
BUCKET = "__bucket"
#: The column naming a row's flush cause (``interval``, ``idle``, ``end``); on a flush request's rows, the request.
FLUSH_CAUSE = "__flush_cause"
CAUSES = ("interval", "idle", "end")
#: The map state of a bucket's buffered changes, and the value state of when its first one was buffered.
LATEST = "latest"
PENDING_SINCE = "pending_since"
#: The metadata Spark gives a stream's event-time column (and a time window over it) once it has a watermark.
WATERMARK_DELAY = "spark.watermarkDelayMs"
#: ``EMIT_ORDER`` of a flushed record at or below the watermark, and above it.
AT_OR_BELOW_WATERMARK, ABOVE_WATERMARK = 0, 1


def window_end(since_ms: int, interval_ms: int) -> int:
    """The end of the ``interval_ms`` window (aligned to the epoch) that ``since_ms`` falls in."""
    return (since_ms // interval_ms + 1) * interval_ms


class BufferProcessor(StatefulProcessor):
    """One bucket's changes of a micro-batch (and flush requests) in; on a flush, the bucket's latest changes out."""

    def __init__(
        self,
        fields: Sequence[StructField],
        key_at: Sequence[int],
        interval_ms: int,
        clock: Clock,
        event_time_at: int | None = None,
    ) -> None:
        self.fields, self.key_at = list(fields), list(key_at)
        self.interval_ms, self.clock = interval_ms, clock
        self.event_time_at = event_time_at
        # The input's columns: the bucket, the data columns, the row kind, the flush request.
        self.kind_at = 1 + len(self.fields)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        key = StructType([self.fields[position] for position in self.key_at])
        change = StructType(
            [StructField("row", StructType(self.fields), nullable=False), StructField("kind", ByteType(), False)]
        )
        self.latest = handle.getMapState(LATEST, key, change)
        self.pending = handle.getValueState(PENDING_SINCE, StructType([StructField("since_ms", LongType(), False)]))
        self.read_row = state_reader(StructType(self.fields))
        self.output_row = Row(*(field.name for field in self.fields), ROW_KIND, FLUSH_CAUSE, EMIT_ORDER)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        now = self.clock.now_ms(timerValues)
        changes: dict[tuple[Any, ...], tuple[tuple[Any, ...], int]] = {}
        requested = None
        for row in rows:
            if row[-1] is not None:
                requested = row[-1]
                continue
            kind = row[self.kind_at]
            if kind == UPDATE_BEFORE:
                continue
            data = tuple(row[1 : self.kind_at])
            changes[tuple(data[position] for position in self.key_at)] = (data, kind)
        pending = self.pending.get()
        since = None if pending is None else pending[0]
        output: list[Row] = []
        if since is not None and now >= window_end(since, self.interval_ms) and requested is None:
            # this batch's changes fall in the next window
            output, since = self._flush("interval", timerValues), None
        for sink_key, change in changes.items():
            self.latest.updateValue(sink_key, change)
        if requested is not None:
            return iter(self._flush(requested, timerValues) if since is not None or changes else ())
        if since is None and changes:
            self.pending.update((now,))
            self._wake_at(window_end(now, self.interval_ms), timerValues)
        return iter(output)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        pending = self.pending.get()
        if pending is None:
            return iter(())
        now, due = self.clock.now_ms(timerValues), window_end(pending[0], self.interval_ms)
        if now >= due:
            return iter(self._flush("interval", timerValues, firing_ms=expiredTimerInfo.getExpiryTimeInMs()))
        self._wake_at(due, timerValues)
        return iter(())

    def _wake_at(self, due_ms: int, timer_values: TimerValues) -> None:
        """A timer for when the window ends: at ``due_ms`` as the batches count time, never at or before this
        batch's time (it would fire in this same batch). A test's clock far behind the batches' time is woken at
        the next batch, and the clock decides."""
        self.handle.registerTimer(max(due_ms, timer_values.getCurrentProcessingTimeInMs() + 1))

    def _flush(self, cause: str, timer_values: TimerValues, firing_ms: int | None = None) -> list[Row]:
        """The bucket's buffered changes, those at or below the watermark first, the buffer cleared and its timers
        deleted (but the one firing, which Spark deletes)."""
        watermark_ms = timer_values.getCurrentWatermarkInMs()
        output = []
        for _key, (row, kind) in self.latest.iterator():
            values = self.read_row(row)
            output.append(self.output_row(*values, kind, cause, self._emit_order(values, watermark_ms)))
        output.sort(key=lambda row: row[-1])
        self.latest.clear()
        self.pending.clear()
        for timer in list(self.handle.listTimers()):
            if timer != firing_ms:
                self.handle.deleteTimer(timer)
        return output

    def _emit_order(self, values: Sequence[Any], watermark_ms: int) -> int:
        """Whether a record comes at or below the watermark (``AT_OR_BELOW_WATERMARK``) or above it."""
        if self.event_time_at is None:
            return AT_OR_BELOW_WATERMARK
        time = values[self.event_time_at]
        if isinstance(time, Row):  # a time window: its end
            time = time["end"]
        if time is None:
            return AT_OR_BELOW_WATERMARK
        return AT_OR_BELOW_WATERMARK if time.timestamp() * 1000 <= watermark_ms else ABOVE_WATERMARK


def event_time_column(fields: Sequence[StructField]) -> int | None:
    """The position of the column Spark marks as the stream's event time (a timestamp, or a time window whose end
    counts), None when there is none."""
    for index, field in enumerate(fields):
        if WATERMARK_DELAY in (field.metadata or {}):
            return index
    return None


def buffered(frame: DataFrame, key: Sequence[str], interval_ms: int, clock: Clock, requests: DataFrame) -> DataFrame:
    """``frame``'s changelog through the buffer, keyed by ``key``: its columns, the row kind, ``FLUSH_CAUSE`` and
    ``EMIT_ORDER``.

    ``requests`` is the stream of flush requests (``flush_requests.flush_requests``).
    """
    fields = data_fields(frame, "the buffer's input")
    key_at = column_indexes(fields, key, "the buffer's key")
    if not isinstance(interval_ms, int) or isinstance(interval_ms, bool) or interval_ms < 1:
        raise SpecError(f"buffer interval_ms={interval_ms!r} is invalid: give whole milliseconds from 1")
    changes = frame.select(
        F.pmod(F.hash(*(quoted(name) for name in key)), F.lit(BUCKETS)).alias(BUCKET),
        *(quoted(field.name) for field in fields),
        ROW_KIND,
        F.lit(None).cast(StringType()).alias(FLUSH_CAUSE),
    )
    control = requests.select(
        F.col(BUCKET).cast(IntegerType()),
        *(F.lit(None).cast(field.dataType).alias(field.name) for field in fields),
        F.lit(None).cast(ByteType()).alias(ROW_KIND),
        F.col(FLUSH_CAUSE).cast(StringType()),
    )
    processor = BufferProcessor(fields, key_at, interval_ms, checked_clock(clock), event_time_column(fields))
    output = StructType(
        [
            *fields,
            StructField(ROW_KIND, ByteType(), nullable=False),
            StructField(FLUSH_CAUSE, StringType(), False),
            StructField(EMIT_ORDER, ByteType(), False),
        ]
    )
    return transform(changes.unionByName(control), [BUCKET], processor, output)
