"""What every source of a streaming query is: something that gives the query a stream of inserted rows."""

from __future__ import annotations

from typing import Protocol

from pyspark.sql import DataFrame, SparkSession


class StreamSource(Protocol):
    """A stream a query reads; its rows are inserts (``changelog.insert_only`` gives them their row kind)."""

    def frame(self, spark: SparkSession) -> DataFrame:
        """The source's rows as a streaming DataFrame of the data columns."""
        ...
