"""A regular equi-join of two changelog streams with a state TTL per side: Flink's ``StreamingJoinOperator``.

Spark's stream-stream join takes neither retractions nor a TTL (only watermarks bound its state), so both inputs go
through one transform-with-state operator: their union, tagged by side and grouped by the join key. Each side's
rows of a key live in a list state of their own (``left_rows``, ``right_rows``), one entry per distinct row with its
multiplicity, its write time and, for the left side of a left join, how many right rows are joined with it; each
side's entries expire by that side's TTL. A key's lists are read whole at each batch that has its rows (Flink too
goes through all of a key's rows of the other side), and rewritten only when an entry changed: new rows are
appended. Expired rows are simply gone: nothing is retracted for them, and a left
row's association count is not lowered when a right row expires (Flink does the same).

A key's rows of one micro-batch are handled one by one, as Flink handles records, in this order: the right side's
accumulations (+I, +U), the left side's accumulations, the left side's retractions (-U, -D), the right side's
retractions, each in the order Spark hands them over. Accumulations go first so that a row added and retracted in
the same batch is found by its retraction, and the order between the sides sends the fewest short-lived
null-padded rows of a left join. An inner join forwards each input row's kind to its joined rows; a left join sends
+I and -D, as Flink does. Rows whose key has a null never match: a left join sends them padded with nulls, without
keeping them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    ListState,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import ByteType, LongType, StructField, StructType

from spark_tables.core.errors import SpecError
from spark_tables.jobs.plan.changelog import (
    DELETE,
    INSERT,
    ROW_KIND,
    ROW_KIND_FIELD,
    column_indexes,
    data_fields,
    is_accumulate,
    quoted,
)
from spark_tables.jobs.plan.clock import Clock, checked_clock
from spark_tables.jobs.plan.state_ttl import CleanupTimer, StateTtl, earliest, state_reader, state_schema, transform

#: The list states of a key's rows of each side.
LEFT_ROWS = "left_rows"
RIGHT_ROWS = "right_rows"
KINDS = ("inner", "left")
#: The union's side tags.
_LEFT, _RIGHT = 0, 1
_SIDE = "__join_side"


class _Side:
    """One side's live rows of the current key, read from its list state: row -> [count, associations, written]."""

    def __init__(
        self, state: ListState, read_row: Callable[[Any], tuple[Any, ...]], ttl: StateTtl, now_ms: int
    ) -> None:
        self.state, self.ttl = state, ttl
        self.entries: dict[tuple[Any, ...], list[int]] = {}
        #: Whether the list state must be written anew: a row was retracted, updated or found expired.
        self.rewrite = False
        #: The rows added since the state was read, none of which was there: these can be appended.
        self.added: list[tuple[Any, ...]] = []
        for row, count, associations, written_ms in state.get():
            if ttl.expired(written_ms, now_ms):
                self.rewrite = True
            else:
                self.entries[read_row(row)] = [count, associations, written_ms]

    def add(self, row: tuple[Any, ...], now_ms: int, associations: int = 0) -> None:
        entry = self.entries.get(row)
        if entry is None:
            self.entries[row] = [1, associations, now_ms]
            self.added.append(row)
        else:
            entry[0], entry[1], entry[2] = entry[0] + 1, associations, now_ms
            self.rewrite = True

    def retract(self, row: tuple[Any, ...], now_ms: int) -> None:
        entry = self.entries.get(row)
        if entry is None:
            return
        if entry[0] == 1:
            del self.entries[row]
        else:
            entry[0], entry[2] = entry[0] - 1, now_ms
        self.rewrite = True

    def associate(self, entry: list[int], associations: int, now_ms: int) -> None:
        entry[1], entry[2] = associations, now_ms
        self.rewrite = True

    def save(self) -> None:
        """Write what changed: the whole list, or only the rows added to it."""
        if self.rewrite and self.entries:
            self.state.put([(row, *entry) for row, entry in self.entries.items()])
        elif self.rewrite:
            self.state.clear()
        elif self.added:
            self.state.appendList([(row, *self.entries[row]) for row in self.added])

    def expiry_ms(self) -> int | None:
        if not self.ttl.expires or not self.entries:
            return None
        return self.ttl.expiry_ms(min(entry[2] for entry in self.entries.values()))


class JoinProcessor(StatefulProcessor):
    """One join key's rows of both sides of a micro-batch in, the changes of the joined rows out."""

    def __init__(
        self,
        kind: str,
        key_count: int,
        left_fields: Sequence[StructField],
        right_fields: Sequence[StructField],
        left_ttl: StateTtl,
        right_ttl: StateTtl,
        clock: Clock,
    ) -> None:
        self.outer = kind == "left"
        self.left_fields, self.right_fields = list(left_fields), list(right_fields)
        self.left_ttl, self.right_ttl, self.clock = left_ttl, right_ttl, clock
        # The union's columns: the join key, the side, the left columns, the right columns, the row kind.
        self.side_at = key_count
        self.left_at = key_count + 1
        self.right_at = self.left_at + len(self.left_fields)
        self.right_nulls = (None,) * len(self.right_fields)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.left_state = handle.getListState(LEFT_ROWS, _entry_schema(self.left_fields))
        self.right_state = handle.getListState(RIGHT_ROWS, _entry_schema(self.right_fields))
        self.timer = CleanupTimer(handle)
        self.read_left = state_reader(StructType(self.left_fields))
        self.read_right = state_reader(StructType(self.right_fields))
        self.output_row = Row(*(field.name for field in self.left_fields + self.right_fields), ROW_KIND)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        left_rows, right_rows = [], []
        for row in rows:
            if row[self.side_at] == _LEFT:
                left_rows.append((tuple(row[self.left_at : self.right_at]), row[-1]))
            else:
                right_rows.append((tuple(row[self.right_at : -1]), row[-1]))
        output: list[Row] = []
        if any(value is None for value in key):
            if self.outer:
                for row, kind in left_rows:
                    output.append(self.output_row(*row, *self.right_nulls, INSERT if is_accumulate(kind) else DELETE))
            return iter(output)
        now = self.clock.now_ms(timerValues)
        left = _Side(self.left_state, self.read_left, self.left_ttl, now)
        right = _Side(self.right_state, self.read_right, self.right_ttl, now)
        for row, kind in right_rows:
            if is_accumulate(kind):
                self._right_accumulates(row, kind, left, right, now, output)
        for row, kind in left_rows:
            if is_accumulate(kind):
                self._left_accumulates(row, kind, left, right, now, output)
        for row, kind in left_rows:
            if not is_accumulate(kind):
                self._left_retracts(row, kind, left, right, now, output)
        for row, kind in right_rows:
            if not is_accumulate(kind):
                self._right_retracts(row, kind, left, right, now, output)
        left.save()
        right.save()
        if self.left_ttl.expires or self.right_ttl.expires:
            self.timer.keep_at(earliest((left.expiry_ms(), right.expiry_ms())), timerValues)
        return iter(output)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        now = self.clock.now_ms(timerValues)
        left = _Side(self.left_state, self.read_left, self.left_ttl, now)
        right = _Side(self.right_state, self.read_right, self.right_ttl, now)
        left.save()
        right.save()
        self.timer.rearm(earliest((left.expiry_ms(), right.expiry_ms())), timerValues)
        return iter(())

    def _left_accumulates(
        self, row: tuple[Any, ...], kind: int, left: _Side, right: _Side, now: int, output: list[Row]
    ) -> None:
        matches = 0
        for other, (count, _, _) in right.entries.items():
            output.extend([self.output_row(*row, *other, INSERT if self.outer else kind)] * count)
            matches += count
        if self.outer and not matches:
            output.append(self.output_row(*row, *self.right_nulls, INSERT))
        left.add(row, now, matches if self.outer else 0)

    def _right_accumulates(
        self, row: tuple[Any, ...], kind: int, left: _Side, right: _Side, now: int, output: list[Row]
    ) -> None:
        right.add(row, now)
        for other, entry in left.entries.items():
            count, associations = entry[0], entry[1]
            if self.outer:
                if associations == 0:
                    output.extend([self.output_row(*other, *self.right_nulls, DELETE)] * count)
                left.associate(entry, associations + 1, now)
            output.extend([self.output_row(*other, *row, INSERT if self.outer else kind)] * count)

    def _left_retracts(
        self, row: tuple[Any, ...], kind: int, left: _Side, right: _Side, now: int, output: list[Row]
    ) -> None:
        left.retract(row, now)
        if self.outer and not right.entries:
            output.append(self.output_row(*row, *self.right_nulls, DELETE))
        for other, (count, _, _) in right.entries.items():
            output.extend([self.output_row(*row, *other, DELETE if self.outer else kind)] * count)

    def _right_retracts(
        self, row: tuple[Any, ...], kind: int, left: _Side, right: _Side, now: int, output: list[Row]
    ) -> None:
        right.retract(row, now)
        for other, entry in left.entries.items():
            count, associations = entry[0], entry[1]
            output.extend([self.output_row(*other, *row, DELETE if self.outer else kind)] * count)
            if self.outer:
                if associations == 1:
                    output.extend([self.output_row(*other, *self.right_nulls, INSERT)] * count)
                left.associate(entry, associations - 1, now)


def join(
    left: DataFrame,
    right: DataFrame,
    *,
    kind: str,
    left_key: Sequence[str],
    right_key: Sequence[str],
    left_ttl_ms: int,
    right_ttl_ms: int,
    clock: Clock,
) -> DataFrame:
    """``left [INNER | LEFT] JOIN right ON left_key = right_key`` over two changelogs, as a changelog.

    The output has the left columns, then the right ones (nullable for a left join); their names must differ.
    """
    left_fields = data_fields(left, "join's left input")
    right_fields = data_fields(right, "join's right input")
    if kind not in KINDS:
        raise SpecError(f"join kind={kind!r} is not supported: use 'inner' or 'left'")
    left_at = column_indexes(left_fields, left_key, "join's left_key")
    right_at = column_indexes(right_fields, right_key, "join's right_key")
    if len(left_at) != len(right_at):
        raise SpecError(f"join keys {list(left_key)} and {list(right_key)} differ in length: pair each column")
    for left_field, right_field in zip(
        [left_fields[i] for i in left_at], [right_fields[i] for i in right_at], strict=True
    ):
        if left_field.dataType != right_field.dataType:
            raise SpecError(
                f"join key {left_field.name} ({left_field.dataType.simpleString()}) and {right_field.name} "
                f"({right_field.dataType.simpleString()}) differ in type: cast one of them first"
            )
    names = [field.name for field in left_fields + right_fields]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise SpecError(f"join inputs both have {', '.join(repeated)}: rename the columns of one side first")
    key = [f"__join_key_{index}" for index in range(len(left_at))]
    tagged_left = left.select(
        *_key_columns(left_key, key),
        F.lit(_LEFT).cast(ByteType()).alias(_SIDE),
        *_columns(left_fields, "__left"),
        *_nulls(right_fields, "__right"),
        ROW_KIND,
    )
    tagged_right = right.select(
        *_key_columns(right_key, key),
        F.lit(_RIGHT).cast(ByteType()).alias(_SIDE),
        *_nulls(left_fields, "__left"),
        *_columns(right_fields, "__right"),
        ROW_KIND,
    )
    if kind == "left":
        right_fields = [StructField(field.name, field.dataType, nullable=True) for field in right_fields]
    processor = JoinProcessor(
        kind,
        len(key),
        left_fields,
        right_fields,
        StateTtl.of(left_ttl_ms, "join left_ttl_ms"),
        StateTtl.of(right_ttl_ms, "join right_ttl_ms"),
        checked_clock(clock),
    )
    output = StructType([*left_fields, *right_fields, ROW_KIND_FIELD])
    return transform(tagged_left.union(tagged_right), key, processor, output)


def _entry_schema(fields: Sequence[StructField]) -> StructType:
    return state_schema(
        StructField("row", StructType(list(fields)), nullable=False),
        StructField("count", LongType(), nullable=False),
        StructField("associations", LongType(), nullable=False),
    )


def _key_columns(names: Sequence[str], aliases: Sequence[str]) -> list[Column]:
    return [quoted(name).alias(alias) for name, alias in zip(names, aliases, strict=True)]


def _columns(fields: Sequence[StructField], prefix: str) -> list[Column]:
    return [quoted(field.name).alias(f"{prefix}_{index}") for index, field in enumerate(fields)]


def _nulls(fields: Sequence[StructField], prefix: str) -> list[Column]:
    return [F.lit(None).cast(field.dataType).alias(f"{prefix}_{index}") for index, field in enumerate(fields)]
