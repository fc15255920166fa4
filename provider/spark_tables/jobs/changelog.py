"""The changelog column every compiled-plan operator reads and writes: Flink's RowKind, one byte per row.

A Spark DataFrame has no row kinds, so a stateful operator's input and output carry the data columns and then
``__row_kind``, with Flink's byte values: an operator that retracts a result it sent earlier (a new count for a
group, a join row that lost its match) sends the old row as -U or -D and the new one as +U or +I.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, StructField

from spark_tables.core.errors import SpecError

#: The name of the last column of an operator's input and output.
ROW_KIND = "__row_kind"
#: Flink's ``RowKind.toByteValue()``: +I, -U, +U, -D.
INSERT = 0
UPDATE_BEFORE = 1
UPDATE_AFTER = 2
DELETE = 3
#: A column by which a sink applies a batch's rows in order, when the batch carries it (the buffer's flushes: rows at
#: or below the watermark first, FLIP-365); a sink never writes it.
EMIT_ORDER = "__emit_order"
#: The changelog column as an operator's output schema declares it.
ROW_KIND_FIELD = StructField(ROW_KIND, ByteType(), nullable=False)


def is_accumulate(kind: int) -> bool:
    """Whether a row of this kind adds to what its consumer holds (+I, +U) rather than retracting (-U, -D)."""
    return kind in (INSERT, UPDATE_AFTER)


def insert_only(frame: DataFrame) -> DataFrame:
    """``frame`` as an insert-only changelog: every row +I. A source's rows enter a plan this way."""
    return frame.withColumn(ROW_KIND, F.lit(INSERT).cast(ByteType()))


def data_fields(frame: DataFrame, what: str) -> list[StructField]:
    """The fields of ``frame`` before its changelog column, which must come last and be a tinyint."""
    fields = frame.schema.fields
    if not fields or fields[-1].name != ROW_KIND or not isinstance(fields[-1].dataType, ByteType):
        raise SpecError(f"{what} has no last column {ROW_KIND} (tinyint): add it with insert_only() for a source")
    data = fields[:-1]
    if ROW_KIND in (field.name for field in data):
        raise SpecError(f"{what} has {ROW_KIND} twice: keep only the last column of that name")
    return data


def column_indexes(fields: Sequence[StructField], names: Sequence[str], what: str) -> list[int]:
    """The positions of ``names`` among ``fields``: a non-empty list of distinct, existing data columns."""
    if isinstance(names, str) or not names:
        raise SpecError(f"{what} must be a non-empty list of column names")
    positions = {field.name: index for index, field in enumerate(fields)}
    missing = [name for name in names if name not in positions]
    if missing:
        raise SpecError(
            f"{what} names {', '.join(map(repr, missing))}, not columns of the input: use one of {', '.join(positions)}"
        )
    if len(set(names)) != len(names):
        raise SpecError(f"{what} names a column twice: list each once")
    return [positions[name] for name in names]


def quoted(name: str) -> Column:
    """The column called ``name``, whatever characters the name has."""
    return F.col("`" + name.replace("`", "``") + "`")
