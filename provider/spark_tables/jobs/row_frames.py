"""The DataFrame of a query or of a producer function, analysed and not run."""

from __future__ import annotations

import importlib

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.errors import JobError, one_line


def rows(spark: SparkSession, query: str | None, producer: str | None) -> DataFrame:
    if query is not None:
        # As a subquery, so that only a query parses: a command (WITH ... INSERT ...) would run at once.
        return spark.sql(f"SELECT * FROM ({query}\n)")
    module_name, function_name = str(producer).split(":")
    try:
        produce = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as err:
        raise JobError(f"producer {producer} cannot be imported ({one_line(err)}): ship it with py_files") from err
    frame = produce(spark)
    if not isinstance(frame, DataFrame):
        raise JobError(f"producer {producer} returned {type(frame).__name__}, not a DataFrame")
    return frame
