"""The tripwire for PySpark's non-public ``to_arrow_type``: the types the lookup join builds its columns in."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from spark_tables.jobs.lookup.arrow_types import arrow_type


@pytest.mark.parametrize(
    ("spark_type", "expected"),
    [
        (LongType(), pa.int64()),
        (DoubleType(), pa.float64()),
        (StringType(), pa.string()),
        (DecimalType(12, 2), pa.decimal128(12, 2)),
        (DateType(), pa.date32()),
        (TimestampType(), pa.timestamp("us", tz="Asia/Tokyo")),
        (TimestampNTZType(), pa.timestamp("us")),
        (ArrayType(StringType()), pa.list_(pa.string())),
    ],
)
def test_spark_types_map_to_the_arrow_types_of_maparrow_batches(spark_type, expected) -> None:
    assert arrow_type(spark_type, "Asia/Tokyo") == expected
