"""A catalog table read as a stream, by Spark's own streaming reader: a file-source table's folder (JSON, CSV,
parquet), a rate source, any table Spark can stream."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class CatalogTableSource:
    """The catalog table ``table`` (as a plan names it) as a stream."""

    table: str

    def frame(self, spark: SparkSession) -> DataFrame:
        return spark.readStream.table(self.table)
