"""Groups of Spark SQL types, made of the types PySpark documents: PySpark's own base classes for them
(``AtomicType``, ``NumericType``, ``IntegralType``, ``FractionalType``) are not public (``tests/unit/
test_private_names.py``)."""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    CharType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    GeographyType,
    GeometryType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
    TimeType,
    VarcharType,
    VariantType,
    YearMonthIntervalType,
)

INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
FRACTIONAL = (FloatType, DoubleType, DecimalType)
NUMERIC = INTEGRAL + FRACTIONAL
#: The types that are neither nested (arrays, maps, structs) nor NULL, intervals of the calendar or user-defined.
SIMPLE = (
    *NUMERIC,
    StringType,
    CharType,
    VarcharType,
    BinaryType,
    BooleanType,
    DateType,
    TimeType,
    TimestampType,
    TimestampNTZType,
    DayTimeIntervalType,
    YearMonthIntervalType,
    VariantType,
    GeographyType,
    GeometryType,
)
