"""A catalog table read as a stream, by Spark's streaming reader of its format (``jobs.table_format``): a file
table's folder (JSON, CSV, parquet), a rate source, a Delta table's appends or change data feed, any table Spark can
stream."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from spark_tables.core.identifiers import TableIdentifier
from spark_tables.jobs.table_format.choice import tables_of
from spark_tables.jobs.table_format.tables import StreamedTable


@dataclass(frozen=True)
class CatalogTableSource:
    """The catalog table ``table`` (as a plan names it) as a stream."""

    table: str

    def changes(self, spark: SparkSession) -> StreamedTable:
        return tables_of(spark, TableIdentifier.parse(self.table)).stream(spark, self.table)
