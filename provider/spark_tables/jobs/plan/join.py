"""A regular equi-join of two changelog streams with a state TTL per side: Flink's ``StreamingJoinOperator``.

Spark's stream-stream join takes neither retractions nor a TTL (only watermarks bound its state), so both inputs go
through one transform-with-state operator: their union, tagged by side and grouped by the join key. A key's rows of
both sides live in one list state (``rows``), one entry per distinct row with its side, its multiplicity, its write
time and, for the left side of a left join, how many right rows are joined with it; each side's entries expire by
that side's TTL. One list for both sides, not one each, because each state call is a round trip to the JVM and
those calls are most of the operator's cost: a key's list is read whole once at each batch that has its rows (Flink
too goes through all of a key's rows of the other side), and written once when something changed: the new rows
appended, or the whole list rewritten when an entry changed. Expired rows are simply gone: nothing is retracted
for them, and a left row's association count is not lowered when a right row expires (Flink does the same).

A key's rows of one micro-batch are handled one by one, as Flink handles records, in this order: the right side's
accumulations (+I, +U), the left side's accumulations, the left side's retractions (-U, -D), the right side's
retractions, each in the order Spark hands them over. Accumulations go first so that a row added and retracted in
the same batch is found by its retraction, and the order between the sides sends the fewest short-lived
null-padded rows of a left join. An inner join forwards each input row's kind to its joined rows; a left join sends
+I and -D, as Flink does. Rows whose key has a null never match: a left join sends them padded with nulls, without
keeping them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import ByteType, LongType, StructField, StructType

from spark_tables.core.errors import SpecError
from spark_tables.jobs.changelog import (
    DELETE,
    INSERT,
    ROW_KIND,
    ROW_KIND_FIELD,
    column_indexes,
    data_fields,
    is_accumulate,
    quoted,
)
from spark_tables.jobs.streaming.clock import Clock, checked_clock
from spark_tables.jobs.streaming.state_ttl import (
    CleanupTimer,
    StateTtl,
    earliest,
    state_reader,
    state_schema,
    transform,
)

#: The list state of a key's rows of both sides; its entries' ``side`` is ``LEFT_SIDE`` or ``RIGHT_SIDE``.
ROWS = "rows"
KINDS = ("inner", "left")
#: The side tags of the union's rows and of the state's entries.
LEFT_SIDE, RIGHT_SIDE = 0, 1
_SIDE = "__join_side"


class _Side:
    """One side's live rows of the current key: row -> [count, associations, written]."""

    def __init__(self, ttl: StateTtl) -> None:
        self.ttl = ttl
        self.entries: dict[tuple[Any, ...], list[int]] = {}
        #: Whether the key's list must be written anew: a row was retracted, updated or found expired.
        self.rewrite = False
        #: The rows added since the list was read, none of which was there: these can be appended.
        self.added: list[tuple[Any, ...]] = []

    def load(self, row: tuple[Any, ...], count: int, associations: int, written_ms: int, now_ms: int) -> None:
        if self.ttl.expired(written_ms, now_ms):
            self.rewrite = True
        else:
            self.entries[row] = [count, associations, written_ms]

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

    def expiry_ms(self) -> int | None:
        if not self.ttl.expires or not self.entries:
            return None
        return self.ttl.expiry_ms(min(entry[2] for entry in self.entries.values()))


class _KeyRows:
    """Both sides' live rows of the current key: read from its list state in one call, written back in one."""

    def __init__(self, processor: JoinProcessor, now_ms: int) -> None:
        self.state = processor.rows_state
        self.left, self.right = _Side(processor.left_ttl), _Side(processor.right_ttl)
        read_left, read_right = processor.read_left, processor.read_right
        for side, left_row, right_row, count, associations, written_ms in self.state.get():
            if side == LEFT_SIDE:
                self.left.load(read_left(left_row), count, associations, written_ms, now_ms)
            else:
                self.right.load(read_right(right_row), count, associations, written_ms, now_ms)

    def save(self) -> None:
        """Write what changed: the whole list, or only the rows added to it."""
        if self.left.rewrite or self.right.rewrite:
            entries = self._entries(self.left.entries, self.right.entries)
            if entries:
                self.state.put(entries)
            else:
                self.state.clear()
        elif self.left.added or self.right.added:
            self.state.appendList(
                self._entries(
                    {row: self.left.entries[row] for row in self.left.added},
                    {row: self.right.entries[row] for row in self.right.added},
                )
            )

    def expiry_ms(self) -> int | None:
        return earliest((self.left.expiry_ms(), self.right.expiry_ms()))

    @staticmethod
    def _entries(left: dict[tuple[Any, ...], list[int]], right: dict[tuple[Any, ...], list[int]]) -> list[tuple]:
        return [(LEFT_SIDE, row, None, *entry) for row, entry in left.items()] + [
            (RIGHT_SIDE, None, row, *entry) for row, entry in right.items()
        ]


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
        self.rows_state = handle.getListState(ROWS, _entry_schema(self.left_fields, self.right_fields))
        self.timer = CleanupTimer(handle)
        self.read_left = state_reader(StructType(self.left_fields))
        self.read_right = state_reader(StructType(self.right_fields))
        self.output_row = Row(*(field.name for field in self.left_fields + self.right_fields), ROW_KIND)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        left_rows, right_rows = [], []
        for row in rows:
            if row[self.side_at] == LEFT_SIDE:
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
        stored = _KeyRows(self, now)
        left, right = stored.left, stored.right
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
        stored.save()
        if self.left_ttl.expires or self.right_ttl.expires:
            self.timer.keep_at(stored.expiry_ms(), timerValues)
        return iter(output)

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        stored = _KeyRows(self, self.clock.now_ms(timerValues))
        stored.save()
        self.timer.rearm(stored.expiry_ms(), timerValues)
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
    if kind not in KINDS:
        raise SpecError(f"join kind={kind!r} is not supported: use 'inner' or 'left'")
    left_fields, right_fields = join_fields(left, right, left_key, right_key)
    key = [f"__join_key_{index}" for index in range(len(left_key))]
    tagged_left = left.select(
        *_key_columns(left_key, key),
        F.lit(LEFT_SIDE).cast(ByteType()).alias(_SIDE),
        *_columns(left_fields, "__left"),
        *_nulls(right_fields, "__right"),
        ROW_KIND,
    )
    tagged_right = right.select(
        *_key_columns(right_key, key),
        F.lit(RIGHT_SIDE).cast(ByteType()).alias(_SIDE),
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


def join_fields(
    left: DataFrame, right: DataFrame, left_key: Sequence[str], right_key: Sequence[str]
) -> tuple[list[StructField], list[StructField]]:
    """The data fields of both sides of a join, checked: keys that exist, pair up and agree in type, and no column
    name on both sides."""
    left_fields = data_fields(left, "join's left input")
    right_fields = data_fields(right, "join's right input")
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
    return left_fields, right_fields


def _entry_schema(left_fields: Sequence[StructField], right_fields: Sequence[StructField]) -> StructType:
    """A ``rows`` entry: its side, the row in the field of that side (the other one null), its multiplicity, its
    associations (left rows of a left join) and when it was written."""
    return state_schema(
        StructField("side", ByteType(), nullable=False),
        StructField("left", StructType(list(left_fields))),
        StructField("right", StructType(list(right_fields))),
        StructField("count", LongType(), nullable=False),
        StructField("associations", LongType(), nullable=False),
    )


def _key_columns(names: Sequence[str], aliases: Sequence[str]) -> list[Column]:
    return [quoted(name).alias(alias) for name, alias in zip(names, aliases, strict=True)]


def _columns(fields: Sequence[StructField], prefix: str) -> list[Column]:
    return [quoted(field.name).alias(f"{prefix}_{index}") for index, field in enumerate(fields)]


def _nulls(fields: Sequence[StructField], prefix: str) -> list[Column]:
    return [F.lit(None).cast(field.dataType).alias(f"{prefix}_{index}") for index, field in enumerate(fields)]
