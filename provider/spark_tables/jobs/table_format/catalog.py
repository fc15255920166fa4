"""Catalog operations on tables of any format, through Spark SQL: what each format's tables build on."""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from spark_tables.core.errors import SpecError
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


def sink_columns(spark: SparkSession, name: str, frame: DataFrame) -> list[str]:
    """The columns of catalog table ``name``, checked to be those of a streaming query's ``frame`` (its data
    columns) with the same types; ``SpecError`` in one line when not."""
    schema = spark.table(TableIdentifier.parse(name).quoted()).schema
    given = {field.name: field.dataType for field in frame.schema}
    extra = [column for column in given if column not in schema.names]
    missing = [column for column in schema.names if column not in given]
    if extra or missing:
        raise SpecError(
            f"catalog sink {name}: the query's columns differ from the table's "
            f"(not in the table: {', '.join(extra) or 'none'}; missing: {', '.join(missing) or 'none'})"
        )
    for field in schema:
        if given[field.name] != field.dataType:
            raise SpecError(
                f"catalog sink {name}: column {field.name} is {given[field.name].simpleString()} in the query "
                f"but {field.dataType.simpleString()} in the table: cast it"
            )
    return schema.names


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
