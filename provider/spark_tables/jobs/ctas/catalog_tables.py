"""Catalog operations on tables, through Spark SQL, and their files (``jobs.files``): what CTAS builds on."""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.jobs import files

log = logging.getLogger(__name__)


def exists(spark: SparkSession, table: TableIdentifier) -> bool:
    return spark.catalog.tableExists(table.quoted())


def properties(spark: SparkSession, table: TableIdentifier) -> dict[str, str] | None:
    """The table's properties, or None if there is no such table."""
    if not exists(spark, table):
        return None
    return {row[0]: row[1] for row in spark.sql(f"SHOW TBLPROPERTIES {table.quoted()}").collect()}


def set_properties(spark: SparkSession, table: TableIdentifier, values: dict[str, str]) -> None:
    spark.sql(f"ALTER TABLE {table.quoted()} SET TBLPROPERTIES ({property_list(values)})")


def rename(spark: SparkSession, table: TableIdentifier, new_name: TableIdentifier) -> None:
    log.info("renaming %s to %s", table, new_name)
    spark.sql(f"ALTER TABLE {table.quoted()} RENAME TO {new_name.quoted()}")


def describe(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """``DESCRIBE TABLE EXTENDED ... AS JSON``: ``location``, ``provider``, ``type``, ``statistics``, ..."""
    return json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table.quoted()} AS JSON").head()[0])


def analyze(spark: SparkSession, table: TableIdentifier) -> None:
    """Compute rows and bytes into the catalog, where ``statistics`` reads them and Spark's optimizer uses them."""
    spark.sql(f"ANALYZE TABLE {table.quoted()} COMPUTE STATISTICS")


def statistics(details: dict[str, Any]) -> tuple[int | None, int | None]:
    """Rows and bytes from ``describe``, when the table has been analysed."""
    found = details.get("statistics") or {}
    return found.get("num_rows"), found.get("size_in_bytes")


def drop(spark: SparkSession, table: TableIdentifier) -> None:
    """Remove the table's files, then its catalog entry, so the entry outlives the files if this is cut short."""
    try:
        location = describe(spark, table).get("location")
    except AnalysisException as err:
        if err.getCondition() == "TABLE_OR_VIEW_NOT_FOUND":  # dropped meanwhile, by another cleanup of the same try
            return
        raise
    if location:
        files.remove(location)
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted()}")
    log.info("dropped %s and its files%s", table, f" under {location}" if location else "")


def property_list(values: dict[str, str]) -> str:
    return ", ".join(f"{sql_string(key)} = {sql_string(value)}" for key, value in values.items())


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def column_list(schema: StructType) -> str:
    """The schema as the column list of ``CREATE TABLE``; names quoted at every depth."""
    return ", ".join(f"{quote_part(field.name)} {_type(field.dataType)}" for field in schema.fields)


def _type(data_type: DataType) -> str:
    if isinstance(data_type, StructType):
        return "STRUCT<" + ", ".join(f"{quote_part(f.name)}: {_type(f.dataType)}" for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{_type(data_type.keyType)}, {_type(data_type.valueType)}>"
    return data_type.simpleString()
