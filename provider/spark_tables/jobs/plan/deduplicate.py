"""Deduplication on processing time with a state TTL: ``ROW_NUMBER() OVER (PARTITION BY key ORDER BY proctime) = 1``.

Spark's ``dropDuplicates`` keeps a key forever (or until a watermark passes it) and cannot keep the last row, so
this is Flink's mini-batch deduplication on Spark's transform-with-state; a keep-first deduplication without TTL
runs on ``dropDuplicates`` (``spark_drop_duplicates``). Keep first (Flink's
``ProcTimeDeduplicateKeepFirstRowFunction``): a key's first row is sent as +I and its later rows are dropped while
the key's marker lives; the marker is written only when a row is sent, so a key whose marker expired is sent again.
Keep last (``ProcTimeDeduplicateKeepLastRowFunction``): a key's row of a batch replaces the one sent before, as
-U(previous) and +U(new), or as +I if there was none; an unchanged row is sent again only when a TTL is set, so that
downstream state of the same row is refreshed too. "First" and "last" of a batch follow the order Spark hands a
key's rows over, which is their order in their input partition.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import StructField, StructType

from spark_tables.core.errors import JobError, SpecError
from spark_tables.jobs.changelog import (
    INSERT,
    ROW_KIND,
    ROW_KIND_FIELD,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    column_indexes,
    data_fields,
)
from spark_tables.jobs.streaming.clock import Clock, checked_clock
from spark_tables.jobs.streaming.state_ttl import (
    CleanupTimer,
    StateTtl,
    expire_value,
    state_reader,
    state_schema,
    transform,
)

#: Keep first: the value state of a key whose first row was sent, holding only when that was.
FIRST_SEEN = "first_seen"
#: Keep last: the value state of a key holding the row sent last (as ``row``) and when.
LAST_ROW = "last_row"
KEEPS = ("first", "last")


class DeduplicateProcessor(StatefulProcessor):
    """One key's rows of a micro-batch in, at most its first row (+I) or its last row (+I or -U, +U) out."""

    def __init__(self, fields: Sequence[StructField], keep: str, ttl: StateTtl, clock: Clock) -> None:
        self.fields, self.keep, self.ttl, self.clock = list(fields), keep, ttl, clock

    def init(self, handle: StatefulProcessorHandle) -> None:
        if self.keep == "first":
            self.state = handle.getValueState(FIRST_SEEN, state_schema())
        else:
            self.state = handle.getValueState(LAST_ROW, state_schema(StructField("row", StructType(self.fields))))
        self.timer = CleanupTimer(handle)
        self.read_row = state_reader(StructType(self.fields))
        self.output_row = Row(*(field.name for field in self.fields), ROW_KIND)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        batch = list(rows)
        if any(row[-1] != INSERT for row in batch):
            raise JobError(f"deduplicate takes insert-only rows: key {key} got an update or delete")
        now = self.clock.now_ms(timerValues)
        entry = self.state.get()
        if entry is not None and self.ttl.expired(entry[-1], now):
            entry = None
        if self.keep == "first":
            if entry is not None:
                return iter(())
            self.state.update((now,))
            self._keep_timer(now, timerValues)
            return iter((batch[0],))
        last = tuple(batch[-1][:-1])
        self.state.update((last, now))
        self._keep_timer(now, timerValues)
        if entry is None:
            return iter((batch[-1],))
        previous = self.read_row(entry[0])
        if previous == last and not self.ttl.expires:
            return iter(())
        return iter((self.output_row(*previous, UPDATE_BEFORE), self.output_row(*last, UPDATE_AFTER)))

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        expire_value(self.state, self.ttl, self.clock, self.timer, timerValues)
        return iter(())

    def _keep_timer(self, written_ms: int, timer_values: TimerValues) -> None:
        if self.ttl.expires:
            self.timer.keep_at(self.ttl.expiry_ms(written_ms), timer_values)


def deduplicate(frame: DataFrame, key: Sequence[str], keep: str, ttl_ms: int, clock: Clock) -> DataFrame:
    """The first or last row of each ``key`` of an insert-only ``frame``, as a changelog of ``frame``'s columns."""
    fields = data_fields(frame, "deduplicate's input")
    column_indexes(fields, key, "deduplicate's key")
    if keep not in KEEPS:
        raise SpecError(f"deduplicate keep={keep!r} is invalid: use 'first' or 'last'")
    processor = DeduplicateProcessor(fields, keep, StateTtl.of(ttl_ms, "deduplicate ttl_ms"), checked_clock(clock))
    return transform(frame, list(key), processor, StructType([*fields, ROW_KIND_FIELD]))


def spark_drop_duplicates(frame: DataFrame, key: Sequence[str]) -> DataFrame:
    """Keep first without TTL on Spark's own operator (``core.plan.implementations.SPARK_DROP_DUPLICATES``): each
    key's first row, an insert; its later rows dropped for ever. Its input must insert only (the pipeline checks)."""
    column_indexes(data_fields(frame, "deduplicate's input"), key, "deduplicate's key")
    return frame.dropDuplicates(list(key))
