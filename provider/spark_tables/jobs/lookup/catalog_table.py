"""A table of the job's own catalog as a lookup source: a Delta table (or one of Spark's file formats), read whole
into a full-cache snapshot, one version of it.

Its rows cannot be queried key by key from an executor's Python worker (that takes a Spark session), so it has a
FULL cache only (``core/lookup/table.py`` refuses the others). The table's format answers what it is asked
(``jobs/table_format``): its current version, from its log, and its rows as of that version, so that a snapshot
holds exactly one version and a reload that finds the version unchanged copies nothing.

Its loads take turns under a lock where the catalog keeps its metastore: an advisory lock in a PostgreSQL
metastore's database (across hosts), or a lock file in the embedded catalog's home (whose Derby metastore admits
the applications of one host only).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spark_tables.core.errors import JobError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs import postgres
from spark_tables.jobs.lookup.source import LookupSource
from spark_tables.jobs.table_format.choice import tables_of

#: In the embedded catalog's home: one lock file a lookup table's loads.
LOCKS = "lookup-locks"


class CatalogLookupSource(LookupSource):
    """``connection``: the metastore database's connection arguments (a PostgreSQL metastore), or ``home`` (the
    embedded catalog's folder)."""

    @property
    def identifier(self) -> TableIdentifier:
        return TableIdentifier.parse(self.table.table)

    def lookup(self, key: tuple) -> Sequence[Sequence]:
        raise JobError(
            f"catalog table {self.table.table} is looked up through its full cache only: set lookup.cache=FULL"
        )

    def _columns(self, frame: DataFrame) -> DataFrame:
        """The key columns, then the value columns (every other one when none were named)."""
        values = self.table.columns or [name for name in frame.columns if name not in self.table.key]
        missing = [name for name in (*self.table.key, *values) if name not in frame.columns]
        if missing:
            raise JobError(
                f"catalog table {self.table.table} has no column(s) {missing}: its columns are {frame.columns}"
            )
        return frame.select(*self.table.key, *values)

    def schema(self, spark: SparkSession) -> StructType:
        return self._columns(spark.table(self.identifier.quoted())).schema

    def version(self, spark: SparkSession) -> TableVersion | None:
        return tables_of(spark, self.identifier).version(spark, self.identifier)

    def scan(self, spark: SparkSession, num_partitions: int, version: TableVersion | None = None) -> DataFrame:
        """The table as of ``version`` (Spark splits its files: ``num_partitions`` does not apply)."""
        return self._columns(tables_of(spark, self.identifier).read(spark, self.identifier, version))

    def exclusive(self, resource: str, while_waiting: Callable[[], None]) -> contextlib.AbstractContextManager[bool]:
        if "home" in self.table.connection:
            return _lock_file(self.table.connection["home"], resource, while_waiting)
        return postgres.advisory_lock(self.table.connection, resource, while_waiting)


@contextlib.contextmanager
def _lock_file(home: str, resource: str, while_waiting: Callable[[], None]) -> Iterator[bool]:
    """An exclusive lock on a file of the embedded catalog's home, released by the kernel if its holder dies."""
    folder = os.path.join(home, LOCKS)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    path = os.path.join(folder, hashlib.sha256(resource.encode()).hexdigest()[:32] + ".lock")
    with open(path, "a", encoding="utf-8") as handle:
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = True
                while_waiting()
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
