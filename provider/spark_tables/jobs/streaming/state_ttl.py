"""State TTL as Flink's SQL runtime applies it, shared by the deduplicate, group-aggregate and join operators.

Flink's ``StateTtlConfig`` as SQL sets it: update type OnCreateAndWrite (writing an entry restarts its time to
live, reading does not) and visibility NeverReturnExpired (an expired entry reads as absent). Each state entry
stores the time it was last written, and the TTL is a parameter of the processor, not of the state: restarting a
query from its checkpoint with another TTL applies the new TTL to the state already there, as Flink does. Spark's
own state TTL stores an expiry time instead (an edited TTL would reach only new writes, and adding one changes the
state schema), so it is not used.

Expired entries that nobody reads again are removed by processing-time timers: one per grouping key, at the
earliest expiry of its entries. Spark fires a processing-time timer once the batch time passes it, but whether an
entry expired is the operator clock's decision, and a test's fixed clock may lag the batch time; a timer is
therefore never set at or before the batch time (it would fire again in the same batch), so a lagging clock sees
the key again at the next batch.

The session must use the RocksDB state store (transform-with-state needs it), and an available-now query of an
operator with timers only ends with no-data micro-batches off: ``session_confs.SESSION_CONFS``; timers then fire
only in batches that have data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
    ValueState,
)
from pyspark.sql.types import ArrayType, BinaryType, DataType, LongType, StructField, StructType, TimestampType

from spark_tables.core.errors import SpecError
from spark_tables.jobs.connect_functions import carried
from spark_tables.jobs.streaming.clock import Clock

#: Every operator runs in processing-time mode, with or without a TTL, so that one can be set on a restart.
TIME_MODE = "ProcessingTime"
#: The field of every state entry holding when it was last written, in the operator clock's epoch milliseconds.
WRITTEN_MS = "written_ms"
WRITTEN_FIELD = StructField(WRITTEN_MS, LongType(), nullable=False)


@dataclass(frozen=True)
class StateTtl:
    """How long a state entry lives after its last write, in milliseconds; 0 keeps it forever."""

    ttl_ms: int

    def __post_init__(self) -> None:
        if not _is_ttl(self.ttl_ms):
            raise SpecError(f"state TTL {self.ttl_ms!r} is invalid: give whole milliseconds, 0 for no expiry")

    @classmethod
    def of(cls, ttl_ms: object, what: str) -> StateTtl:
        """The TTL an operator's argument ``what`` gives."""
        if not _is_ttl(ttl_ms):
            raise SpecError(f"{what}={ttl_ms!r} is invalid: give whole milliseconds, 0 for no expiry")
        return cls(ttl_ms)

    @property
    def expires(self) -> bool:
        return self.ttl_ms > 0

    def expired(self, written_ms: int, now_ms: int) -> bool:
        return self.ttl_ms > 0 and now_ms - written_ms >= self.ttl_ms

    def expiry_ms(self, written_ms: int) -> int | None:
        """When an entry written at ``written_ms`` expires; None if it never does."""
        return written_ms + self.ttl_ms if self.ttl_ms > 0 else None


def _is_ttl(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def earliest(expiries: Iterable[int | None]) -> int | None:
    """The first of the expiry times that are set, None if none is."""
    return min((expiry for expiry in expiries if expiry is not None), default=None)


class CleanupTimer:
    """The one processing-time timer of the current grouping key, at the earliest expiry of its state."""

    def __init__(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle

    def keep_at(self, expiry_ms: int | None, timer_values: TimerValues) -> None:
        """After writing a key's state: the key's timer at ``expiry_ms``, or none if nothing of it expires."""
        wanted = _timer_time(expiry_ms, timer_values)
        registered = list(self.handle.listTimers())
        for timer in registered:
            if timer != wanted:
                self.handle.deleteTimer(timer)
        if wanted is not None and wanted not in registered:
            self.handle.registerTimer(wanted)

    def rearm(self, expiry_ms: int | None, timer_values: TimerValues) -> None:
        """In the handler of the key's fired timer (which Spark then deletes): a timer for what is left."""
        wanted = _timer_time(expiry_ms, timer_values)
        if wanted is not None:
            self.handle.registerTimer(wanted)


def expire_value(
    state: ValueState, ttl: StateTtl, clock: Clock, timer: CleanupTimer, timer_values: TimerValues
) -> None:
    """What a fired timer does to a key whose state is one value with its write time last: clear it when the clock
    says it expired, else set a timer for when it will (the TTL may have been edited since the value was written)."""
    entry = state.get()
    if entry is None:
        return
    if ttl.expired(entry[-1], clock.now_ms(timer_values)):
        state.clear()
    else:
        timer.rearm(ttl.expiry_ms(entry[-1]), timer_values)


def _timer_time(expiry_ms: int | None, timer_values: TimerValues) -> int | None:
    if expiry_ms is None:
        return None
    return max(expiry_ms, timer_values.getCurrentProcessingTimeInMs() + 1)


def state_schema(*fields: StructField) -> StructType:
    """A state entry's schema: ``fields`` and then the time it was written."""
    return StructType([*fields, WRITTEN_FIELD])


def state_reader(data_type: DataType) -> Callable[[Any], Any]:
    """How to read back a value of this type from state as input rows carry it, so that the two compare equal.

    Spark returns a timestamp from state as a naive datetime in the worker's local time and binary as a bytearray,
    where input rows hold an aware datetime and bytes; structs come back as Rows, made plain tuples here.
    """
    if not _needs_reading(data_type):
        return _as_is
    if isinstance(data_type, TimestampType):
        return lambda value: value.astimezone() if value is not None and value.tzinfo is None else value
    if isinstance(data_type, BinaryType):
        return lambda value: None if value is None else bytes(value)
    if isinstance(data_type, ArrayType):
        read_item = state_reader(data_type.elementType)
        return lambda value: None if value is None else [read_item(item) for item in value]
    readers = [state_reader(field.dataType) for field in data_type.fields]
    return lambda value: None if value is None else tuple(read(item) for read, item in zip(readers, value, strict=True))


def _needs_reading(data_type: DataType) -> bool:
    if isinstance(data_type, ArrayType):
        return _needs_reading(data_type.elementType)
    return isinstance(data_type, StructType | TimestampType | BinaryType)


def _as_is(value: Any) -> Any:
    return value


def transform(frame: DataFrame, key: list[str], processor: StatefulProcessor, output_schema: StructType) -> DataFrame:
    """``processor`` over ``frame`` grouped by ``key``: each call gets one key's rows of one micro-batch.

    Row-based transform-with-state, not the pandas one: measured on the same operators, it was the faster. Spark
    builds a pandas frame for each key's input and output, which costs more than the plain rows of a key that
    the local aggregation or a join's few rows per key hand over.
    """
    carried_processor = carried(frame.sparkSession, processor)  # over Spark Connect, with the provider's code
    return frame.groupBy(*key).transformWithState(carried_processor, output_schema, "Append", TIME_MODE)
