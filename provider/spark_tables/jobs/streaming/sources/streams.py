"""Which source streams a table a plan reads: one line per kind of source (``StreamSource``)."""

from __future__ import annotations

from spark_tables.jobs.streaming.sources.catalog_table import CatalogTableSource
from spark_tables.jobs.streaming.sources.source import StreamSource


def stream_source(table: str) -> StreamSource:
    """The source of ``table``: every table is a catalog table, read by Spark's streaming reader."""
    return CatalogTableSource(table)
