"""Group aggregation over a changelog with a state TTL: Flink's two-phase (local-global) group aggregation.

Spark's streaming aggregation neither retracts (its input is append-only) nor forgets a group, so the accumulators
live in one value state per group, written with their time. A batch's changes of a group are applied together
(+I/+U add a row, -U/-D take one away), then the group's result goes out as Flink's changelog: +I for its first
result, -U(old) and +U(new) for a changed one, -D(old) once its row count drops to zero (and its state is cleared).
An unchanged result is sent again as -U/+U only when a TTL is set, as Flink does to keep downstream state alive.

Spark hands a transform-with-state operator its rows one value at a time, which costs far more than the
aggregation itself, so each input partition's rows of a micro-batch are first added up per group with Arrow
(``LocalAggregate``, Flink's local aggregation), and the stateful operator merges a few partial rows per group (its
global aggregation). As in Flink's global aggregation, what a batch adds and retracts is netted: the order of a
group's rows within a batch does not matter, and a group without state (new, or expired) whose batch retracts at
least as many rows as it adds sends nothing.

MIN, MAX and the DISTINCT aggregates keep a count per value of their column, as Flink's retractable MIN/MAX do, so
that a retracted minimum gives way to the next one; each batch that touches a group rewrites its counts. Over an
input that never retracts (``insert_only``, which the plan's compiler knows as Flink's changelog-mode inference
does), MIN and MAX keep only the extreme value, as Flink's append-only MIN/MAX do.
"""

from __future__ import annotations

import decimal
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StructField,
    StructType,
)

from spark_tables.core.errors import JobError, SpecError
from spark_tables.core.plan.aggregates import AggregateCall
from spark_tables.jobs.changelog import (
    DELETE,
    INSERT,
    ROW_KIND,
    ROW_KIND_FIELD,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    column_indexes,
    data_fields,
    quoted,
)
from spark_tables.jobs.connect_functions import carried
from spark_tables.jobs.data_types import FRACTIONAL, NUMERIC, SIMPLE
from spark_tables.jobs.streaming.clock import Clock, checked_clock
from spark_tables.jobs.streaming.state_ttl import (
    CleanupTimer,
    StateTtl,
    expire_value,
    state_reader,
    state_schema,
    transform,
)

#: The value state of a group: its row count, what it keeps of each aggregated column, and the write time.
ACCUMULATOR = "accumulator"
#: Decimal sums and averages are exact up to Spark's 38 digits (Python's default context rounds at 28).
_EXACT = decimal.Context(prec=80)
#: A partial row's part: 0 for a group's sums, i + 1 for its value counts of the i-th value-counted column.
_PART = "__part"
#: A value-count partial row's counts, one per value of its ``__value_list_<column>`` list.
_COUNTS = "__count_list"


@dataclass(frozen=True)
class _Sum:
    """One accumulator of a group's sums: its row count, or a column's non-null count, total, minimum or maximum.

    A partition's rows are added up into it with one Arrow aggregation; partials then merge into the state.
    """

    kind: str  # "rows", "values", "total", "min" or "max"
    column: int | None
    column_type: DataType | None

    @property
    def name(self) -> str:
        return "row_count" if self.kind == "rows" else f"{self.kind}_{self.column}"

    @property
    def type(self) -> DataType:
        if self.kind in ("rows", "values"):
            return LongType()
        return _total_type(self.column_type) if self.kind == "total" else self.column_type

    def zero(self) -> Any:
        if self.kind in ("rows", "values"):
            return 0
        return _zero_of(self.type) if self.kind == "total" else None

    def per_row(self, values: pa.ChunkedArray | None, sign: pa.ChunkedArray, adds: pa.ChunkedArray) -> Any:
        """What each input row adds to this sum, for Arrow's ``sum``, ``min`` or ``max`` per group."""
        if self.kind == "rows":
            return sign
        if self.kind == "values":
            return pc.if_else(pc.is_valid(values), sign, pa.scalar(0, pa.int64()))
        if self.kind == "total":
            wide = pc.cast(values, _arrow_sum_type(self.type))
            return pc.if_else(adds, wide, pc.negate(wide))
        return values

    @property
    def arrow_function(self) -> str:
        return self.kind if self.kind in ("min", "max") else "sum"

    def merge(self, stored: Any, partial: Any) -> Any:
        if partial is None:
            return stored
        if stored is None:
            return partial
        if self.kind == "min":
            return min(stored, partial)
        if self.kind == "max":
            return max(stored, partial)
        return _add(stored, partial)


@dataclass(frozen=True)
class _Result:
    """Where one aggregate call's result comes from: positions among the sums and the value-counted columns."""

    function: str
    distinct: bool
    result_type: DataType
    #: COUNT(*), COUNT(x), MIN, MAX: the sum holding it; SUM and AVG: the total, then the non-null count.
    sums: tuple[int, ...] = ()
    #: MIN and MAX of an input that retracts, the DISTINCT aggregates: the value-counted column.
    counts: int | None = None

    def of(self, sums: list[Any], counts: list[Counter[Any]]) -> Any:
        if self.counts is not None:
            values = [value for value, n in counts[self.counts].items() if n > 0]
            return _of_values(self.function, values, self.result_type)
        if self.function in ("count", "min", "max"):
            return sums[self.sums[0]]
        total, values = sums[self.sums[0]], sums[self.sums[1]]
        if values <= 0:
            return None
        return total if self.function == "sum" else _average(total, values, self.result_type)


@dataclass(frozen=True)
class _Plan:
    """What both phases need: the key, the aggregated columns and what is kept of them, and the results."""

    key_types: tuple[DataType, ...]
    column_types: tuple[DataType, ...]
    sums: tuple[_Sum, ...]
    #: The aggregated columns that keep a count per value, by position.
    counted_columns: tuple[int, ...]
    results: tuple[_Result, ...]
    insert_only: bool

    @property
    def key_count(self) -> int:
        return len(self.key_types)

    def partial_schema(self) -> StructType:
        """The local aggregation's rows: the key, the part, the sums, a value count and its value."""
        return StructType(
            [StructField(f"__key_{index}", kind) for index, kind in enumerate(self.key_types)]
            + [StructField(_PART, IntegerType(), nullable=False)]
            + [StructField(f"__{one.name}", one.type) for one in self.sums]
            + [StructField(_COUNTS, ArrayType(LongType()))]
            + [
                StructField(f"__value_list_{column}", ArrayType(self.column_types[column]))
                for column in self.counted_columns
            ]
        )

    def state_schema(self) -> StructType:
        counts = [
            StructField(
                f"value_counts_{column}",
                ArrayType(
                    StructType(
                        [
                            StructField("value", self.column_types[column], nullable=False),
                            StructField("count", LongType(), nullable=False),
                        ]
                    ),
                    containsNull=False,
                ),
                nullable=False,
            )
            for column in self.counted_columns
        ]
        return state_schema(*(StructField(one.name, one.type) for one in self.sums), *counts)


class LocalAggregate:
    """The local phase, with Arrow: one input partition's rows of a micro-batch, added up per group.

    Its partial rows are each group's sums (``__part`` 0) and, for each value-counted column, each group's values
    with their net counts (rows added less rows retracted), as two lists (``__part`` i + 1, ``__value_list_<column>``
    and ``__count_list``): Spark hands a list over at once, not value by value. Other fields are null.
    """

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [batch for batch in batches if batch.num_rows]
        if not received:
            return
        table = pa.Table.from_batches(received)
        plan = self.plan
        keys = table.column_names[: plan.key_count]
        adds = pc.is_in(table[ROW_KIND], pa.array([INSERT, UPDATE_AFTER], pa.int8()))
        if plan.insert_only and not pc.all(adds).as_py():
            raise JobError("group_aggregate's input was declared insert-only, but it has an update or a delete")
        sign = pc.if_else(adds, pa.scalar(1, pa.int64()), pa.scalar(-1, pa.int64()))
        columns = [table[plan.key_count + index] for index in range(len(plan.column_types))]
        schema = self._arrow_schema(table)
        per_row = {name: table[name] for name in keys}
        for one in plan.sums:
            per_row[f"__{one.name}"] = one.per_row(None if one.column is None else columns[one.column], sign, adds)
        sums = (
            pa.table(per_row)
            .group_by(keys, use_threads=False)
            .aggregate([(f"__{one.name}", one.arrow_function) for one in plan.sums])
        )
        renamed = {f"__{one.name}_{one.arrow_function}": f"__{one.name}" for one in plan.sums}
        yield from _partial_rows(sums, 0, renamed, schema)
        for part, column in enumerate(plan.counted_columns, start=1):
            values = f"__value_list_{column}"
            counts = (
                pa.table({**{name: table[name] for name in keys}, values: columns[column], _COUNTS: sign})
                .filter(pc.is_valid(columns[column]))
                .group_by([*keys, values], use_threads=False)
                .aggregate([(_COUNTS, "sum")])
            )
            counts = counts.filter(pc.not_equal(counts[f"{_COUNTS}_sum"], 0))
            # One row per group with its values and their counts, two lists in the same order.
            lists = counts.group_by(keys, use_threads=False).aggregate([(values, "list"), (f"{_COUNTS}_sum", "list")])
            yield from _partial_rows(lists, part, {f"{values}_list": values, f"{_COUNTS}_sum_list": _COUNTS}, schema)

    def _arrow_schema(self, table: pa.Table) -> pa.Schema:
        """The partial rows' Arrow schema, with the key's and the columns' types as Spark sent them."""
        plan = self.plan
        column_type = {
            index: table.schema.field(plan.key_count + index).type for index in range(len(plan.column_types))
        }
        return pa.schema(
            [pa.field(f"__key_{index}", table.schema.field(index).type) for index in range(plan.key_count)]
            + [pa.field(_PART, pa.int32(), nullable=False)]
            + [
                pa.field(
                    f"__{one.name}",
                    column_type[one.column] if one.kind in ("min", "max") else _arrow_type(one.type),
                )
                for one in plan.sums
            ]
            + [pa.field(_COUNTS, pa.list_(pa.int64()))]
            + [pa.field(f"__value_list_{column}", pa.list_(column_type[column])) for column in plan.counted_columns]
        )


class GroupAggregateProcessor(StatefulProcessor):
    """The global phase: one group's partial rows of a micro-batch in, the change of its result out."""

    def __init__(self, plan: _Plan, output: StructType, ttl: StateTtl, clock: Clock) -> None:
        self.plan, self.output, self.ttl, self.clock = plan, output, ttl, clock
        # The partial rows' fields: the key, the part, the sums, the counts, the lists of counted values.
        self.part_at = plan.key_count
        self.sums_at = self.part_at + 1
        self.counts_at = self.sums_at + len(plan.sums)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(ACCUMULATOR, self.plan.state_schema())
        self.timer = CleanupTimer(handle)
        self.read_sums = [state_reader(one.type) for one in self.plan.sums]
        self.read_values = [state_reader(self.plan.column_types[column]) for column in self.plan.counted_columns]
        self.output_row = Row(*self.output.names)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        now = self.clock.now_ms(timerValues)
        entry = self.state.get()
        stored = entry is not None
        if entry is not None and self.ttl.expired(entry[-1], now):
            entry = None
        sums, counts = self._unpacked(entry)
        previous = None if entry is None else self._results(sums, counts)
        for row in rows:
            part = row[self.part_at]
            if part == 0:
                sums = [
                    one.merge(value, row[self.sums_at + index])
                    for index, (one, value) in enumerate(zip(self.plan.sums, sums, strict=True))
                ]
            else:
                column_counts = counts[part - 1]
                for value, count in zip(row[self.counts_at + part], row[self.counts_at], strict=True):
                    column_counts[value] += count
        if sums[0] <= 0:
            if stored:
                self.state.clear()
                self._keep_timer(None, timerValues)
            return iter(() if previous is None else (self.output_row(*key, *previous, DELETE),))
        counted = [[(value, n) for value, n in column.items() if n > 0] for column in counts]
        self.state.update((*sums, *counted, now))
        self._keep_timer(self.ttl.expiry_ms(now), timerValues)
        current = self._results(sums, counts)
        if previous is None:
            return iter((self.output_row(*key, *current, INSERT),))
        if current == previous and not self.ttl.expires:
            return iter(())
        return iter((self.output_row(*key, *previous, UPDATE_BEFORE), self.output_row(*key, *current, UPDATE_AFTER)))

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        expire_value(self.state, self.ttl, self.clock, self.timer, timerValues)
        return iter(())

    def _unpacked(self, entry: tuple[Any, ...] | None) -> tuple[list[Any], list[Counter[Any]]]:
        if entry is None:
            return [one.zero() for one in self.plan.sums], [Counter() for _ in self.plan.counted_columns]
        sums = [read(value) for read, value in zip(self.read_sums, entry[: len(self.read_sums)], strict=True)]
        counts = [
            Counter({read(value): count for value, count in pairs})
            for read, pairs in zip(self.read_values, entry[len(self.plan.sums) : -1], strict=True)
        ]
        return sums, counts

    def _results(self, sums: list[Any], counts: list[Counter[Any]]) -> list[Any]:
        return [result.of(sums, counts) for result in self.plan.results]

    def _keep_timer(self, expiry_ms: int | None, timer_values: TimerValues) -> None:
        if self.ttl.expires:
            self.timer.keep_at(expiry_ms, timer_values)


def group_aggregate(
    frame: DataFrame,
    key: Sequence[str],
    aggregates: Sequence[AggregateCall],
    ttl_ms: int,
    clock: Clock,
    *,
    insert_only: bool = False,
) -> DataFrame:
    """``SELECT key, aggregates FROM frame GROUP BY key`` over the changelog ``frame``, as a changelog.

    The output has the key columns, then each aggregate's ``output``, typed as Spark's own
    ``frame.groupBy(key).agg(...)`` types them. ``insert_only``: ``frame`` never retracts (a source, a keep-first
    dedup), so MIN and MAX keep one value instead of a count per value; a retraction then fails the query.
    """
    fields = data_fields(frame, "group_aggregate's input")
    column_indexes(fields, key, "group_aggregate's key")
    if isinstance(aggregates, AggregateCall) or not aggregates:
        raise SpecError("group_aggregate needs a non-empty list of AggregateCall")
    types = {one.name: one.dataType for one in fields}
    nested = [name for name in key if not isinstance(types[name], SIMPLE)]
    if nested:
        raise SpecError(f"group_aggregate's key {', '.join(nested)} is not of a simple type: group by its fields")
    spark_types = frame.groupBy(*key).agg(*(_spark_call(call, types) for call in aggregates)).schema
    outputs = spark_types.names
    if len(set(outputs)) != len(outputs):
        raise SpecError(f"group_aggregate's output columns {', '.join(outputs)} repeat a name: give each its own")
    output = StructType([*spark_types.fields, ROW_KIND_FIELD])
    plan = _plan(aggregates, [types[name] for name in key], types, spark_types.fields[len(key) :], insert_only)
    read = list(dict.fromkeys(call.column for call in aggregates if call.column is not None))
    local = frame.select(
        *(quoted(name).alias(f"__key_{index}") for index, name in enumerate(key)),
        *(quoted(name).alias(f"__column_{index}") for index, name in enumerate(read)),
        ROW_KIND,
    ).mapInArrow(carried(frame.sparkSession, LocalAggregate(plan)), plan.partial_schema())
    processor = GroupAggregateProcessor(
        plan, output, StateTtl.of(ttl_ms, "group_aggregate ttl_ms"), checked_clock(clock)
    )
    return transform(local, [f"__key_{index}" for index in range(len(key))], processor, output)


def _plan(
    calls: Sequence[AggregateCall],
    key_types: list[DataType],
    types: dict[str, DataType],
    result_fields: Sequence[StructField],
    insert_only: bool,
) -> _Plan:
    read = list(dict.fromkeys(call.column for call in calls if call.column is not None))
    column_types = [types[name] for name in read]
    sums = [_Sum("rows", None, None)]
    counted_columns: list[int] = []

    def sum_of(kind: str, column: int) -> int:
        one = _Sum(kind, column, column_types[column])
        if one not in sums:
            sums.append(one)
        return sums.index(one)

    def counts_of(column: int) -> int:
        if column not in counted_columns:
            counted_columns.append(column)
        return counted_columns.index(column)

    results = []
    for call, result_field in zip(calls, result_fields, strict=True):
        result = _Result(call.function, call.distinct, result_field.dataType)
        if call.column is None:
            result = replace(result, sums=(0,))
        elif call.distinct or (call.function in ("min", "max") and not insert_only):
            result = replace(result, counts=counts_of(read.index(call.column)))
        elif call.function in ("min", "max", "count"):
            kind = "values" if call.function == "count" else call.function
            result = replace(result, sums=(sum_of(kind, read.index(call.column)),))
        else:
            column = read.index(call.column)
            result = replace(result, sums=(sum_of("total", column), sum_of("values", column)))
        results.append(result)
    return _Plan(
        tuple(key_types), tuple(column_types), tuple(sums), tuple(counted_columns), tuple(results), insert_only
    )


def _spark_call(call: object, types: dict[str, DataType]) -> Any:
    """The Spark aggregate ``call`` stands for, checked against the input's columns."""
    if not isinstance(call, AggregateCall):
        raise SpecError(f"group_aggregate got {call!r} as an aggregate: pass AggregateCall objects")
    if call.column is None:
        return F.count(F.lit(1)).alias(call.output)
    if call.column not in types:
        raise SpecError(f"aggregate {call.describe()} reads {call.column!r}, not a column of the input")
    column_type = types[call.column]
    if call.function in ("sum", "avg") and not isinstance(column_type, NUMERIC):
        raise SpecError(f"aggregate {call.describe()} needs a numeric column, not {column_type.simpleString()}")
    if (call.distinct or call.function in ("min", "max")) and not isinstance(column_type, SIMPLE):
        raise SpecError(f"aggregate {call.describe()} needs a column of a simple type, not {column_type.typeName()}")
    distinct = "DISTINCT " if call.distinct else ""
    return F.expr(f"{call.function}({distinct}`{call.column.replace('`', '``')}`)").alias(call.output)


def _partial_rows(grouped: pa.Table, part: int, renames: dict[str, str], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``grouped``'s rows as partial rows of ``part``, in ``schema``, with null in the fields they do not fill."""
    named = {renames.get(name, name): grouped[name] for name in grouped.column_names}
    named[_PART] = pa.array([part] * grouped.num_rows, pa.int32())
    arrays = [
        pc.cast(named[one.name], one.type) if one.name in named else pa.nulls(grouped.num_rows, one.type)
        for one in schema
    ]
    yield from pa.Table.from_arrays(arrays, schema=schema).to_batches()


def _total_type(column_type: DataType) -> DataType:
    """What Spark sums a column of this type as: a decimal gets ten more digits, any integral column bigint."""
    if isinstance(column_type, DecimalType):
        return DecimalType(min(38, column_type.precision + 10), column_type.scale)
    return DoubleType() if isinstance(column_type, FRACTIONAL) else LongType()


def _arrow_type(total_type: DataType) -> pa.DataType:
    if isinstance(total_type, DecimalType):
        return pa.decimal128(total_type.precision, total_type.scale)
    return pa.float64() if isinstance(total_type, DoubleType) else pa.int64()


def _arrow_sum_type(total_type: DataType) -> pa.DataType:
    """What Arrow adds a partition's values up in: a decimal with all of its 38 digits, so that it cannot overflow."""
    return pa.decimal128(38, total_type.scale) if isinstance(total_type, DecimalType) else _arrow_type(total_type)


def _of_values(function: str, values: list[Any], result_type: DataType) -> Any:
    """An aggregate over the distinct values a group holds."""
    if function == "count":
        return len(values)
    if not values:
        return None
    if function == "min":
        return min(values)
    if function == "max":
        return max(values)
    total = _zero_of(result_type if function == "sum" else _average_total_type(result_type))
    for value in values:
        total = _add(total, value)
    return total if function == "sum" else _average(total, len(values), result_type)


def _average_total_type(average_type: DataType) -> DataType:
    """The type to add up the values of an average of this result type in (exactly, for a decimal)."""
    return DecimalType(38, 18) if isinstance(average_type, DecimalType) else average_type


def _zero_of(total_type: DataType) -> Any:
    if isinstance(total_type, DecimalType):
        return Decimal(0)
    return 0.0 if isinstance(total_type, FRACTIONAL) else 0


def _add(total: Any, value: Any) -> Any:
    return _EXACT.add(total, value) if isinstance(total, Decimal) else total + value


def _average(total: Any, values: int, result_type: DataType) -> Any:
    """``total / values`` as Spark's AVG gives it: a double, or a decimal rounded half up to the result's scale."""
    if isinstance(result_type, DecimalType):
        quotient = _EXACT.divide(Decimal(total), Decimal(values))
        return quotient.quantize(Decimal(1).scaleb(-result_type.scale), rounding=decimal.ROUND_HALF_UP, context=_EXACT)
    return float(total) / values
