"""What every source of a streaming query is: something that gives the query a stream of changes."""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import SparkSession

from spark_tables.jobs.table_format.tables import StreamedTable


class StreamSource(Protocol):
    """A stream a query reads."""

    def changes(self, spark: SparkSession) -> StreamedTable:
        """The source's changes as a streaming DataFrame of the data columns and the row kind (``jobs.changelog``),
        and whether they are all inserts."""
        ...
