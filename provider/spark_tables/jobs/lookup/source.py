"""Lookup sources: the external systems a lookup join reads (FLIP-221's LookupFunction and its async variant).

A source answers ``lookup(key)`` with the rows whose key columns equal ``key`` (sync, on an executor's Python
worker) or ``await lookup_async(key)``, and scans the whole table into a DataFrame for a full-cache snapshot
(on the driver, with Spark's own reader), as of the version it says the table is at where the table has versions.
Add a system by subclassing ``LookupSource`` and naming it in ``SOURCE_KINDS``.
"""

from __future__ import annotations

import contextlib
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.table import CATALOG, POSTGRES, SourceTable
from spark_tables.core.table_format.version import TableVersion

#: Source kind -> ``module:class`` of its ``LookupSource``, imported when first used.
SOURCE_KINDS = {
    POSTGRES: "spark_tables.jobs.lookup.postgres:PostgresLookupSource",
    CATALOG: "spark_tables.jobs.lookup.catalog_table:CatalogLookupSource",
}


class LookupSource(ABC):
    """One lookup table in one external system. Instances open their connections lazily and are used by one
    worker thread at a time; ``close`` releases them."""

    def __init__(self, table: SourceTable) -> None:
        self.table = table

    @abstractmethod
    def lookup(self, key: tuple) -> Sequence[Sequence]:
        """The value columns, in ``columns`` order, of the rows whose key columns equal ``key``; empty if none."""

    def lookup_many(self, keys: Sequence[tuple]) -> Sequence[Sequence[Sequence]]:
        """The rows of each of ``keys``, in their order; sources that can ask for many keys at once override this."""
        return [self.lookup(key) for key in keys]

    async def lookup_async(self, key: tuple) -> Sequence[Sequence]:
        """The same, without blocking the event loop; sources with an async client override this."""
        return self.lookup(key)

    @abstractmethod
    def schema(self, spark: SparkSession) -> StructType:
        """The Spark schema of the key columns followed by the value columns, read from the system's catalog."""

    def version(self, spark: SparkSession) -> TableVersion | None:
        """The table's current version, read without reading its rows; None where the system keeps no versions."""
        return None

    @abstractmethod
    def scan(self, spark: SparkSession, num_partitions: int, version: TableVersion | None = None) -> DataFrame:
        """The whole table (key and value columns), read in parallel by Spark's reader for this system, as of
        ``version`` (one ``version`` gave) where it has versions."""

    @abstractmethod
    def exclusive(self, resource: str, while_waiting: Callable[[], None]) -> contextlib.AbstractContextManager[bool]:
        """Hold the lock named ``resource`` for the block, against every client of the system, on any host;
        entering yields whether another client held it first. While it waits it calls ``while_waiting``, which
        may raise to give up. A client that dies releases the lock."""

    def close(self) -> None:  # noqa: B027 - sources without connections have nothing to release
        """Release connections."""


def source_for(table: SourceTable) -> LookupSource:
    target = SOURCE_KINDS.get(table.kind)
    if target is None:
        raise SpecError(f"lookup source kind {table.kind!r} is unknown: use one of {sorted(SOURCE_KINDS)}")
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)(table)
