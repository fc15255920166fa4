"""Catalog operations on tables of any format, through Spark SQL: what each format's tables build on."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from spark_tables.core.identifiers import TableIdentifier, quote_part

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


def details(spark: SparkSession, table: TableIdentifier) -> dict[str, str] | None:
    """The table's detailed information (``Provider``, ``Type``, ``Location``, ...) from ``DESCRIBE TABLE
    EXTENDED``'s rows, which every format answers (its ``AS JSON`` form only Spark's own); None if there is no such
    table."""
    if not exists(spark, table):
        return None
    return {str(row[0]): str(row[1]) for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table.quoted()}").collect()}


def provider(spark: SparkSession, table: TableIdentifier) -> str | None:
    """The table's format (its ``USING``: ``parquet``, ``delta``, ...), or None if there is no such table."""
    found = details(spark, table) or {}
    return found.get("Provider", "").lower() or None


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
