"""Which format's tables answer for a table: by the format a CTAS names, or the one an existing table has."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.table_format.delta import DELTA
from spark_tables.jobs.table_format import catalog
from spark_tables.jobs.table_format.delta import DELTA_TABLES
from spark_tables.jobs.table_format.file_tables import FILE_TABLES
from spark_tables.jobs.table_format.tables import FormatTables

#: The formats with tables of their own, one line each; Spark's file formats are ``FILE_TABLES``'.
_FORMAT_TABLES: dict[str, FormatTables] = {DELTA.name: DELTA_TABLES}


def tables_for(format_name: str) -> FormatTables:
    """The tables of a format, by its name (``USING``)."""
    return _FORMAT_TABLES.get(format_name.lower(), FILE_TABLES)


def session_default_format(spark: SparkSession) -> str:
    """The format of a table made without ``USING`` in this session: the catalog's default format, as its connection's
    ``default-format`` sets Spark's ``spark.sql.sources.default`` (Spark's own default: parquet)."""
    return str(spark.conf.get("spark.sql.sources.default", "parquet")).lower()


def tables_of(spark: SparkSession, table: TableIdentifier) -> FormatTables:
    """The tables of an existing table's format; Spark's file formats' where there is no table under the name (what
    a staging CTAS leaves under other names is theirs)."""
    return tables_for(catalog.provider(spark, table) or "")
