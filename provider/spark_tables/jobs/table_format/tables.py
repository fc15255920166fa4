"""What a capability asks of the tables of one format: make a CTAS's table (created, filled and given its name,
atomically where the format can), mark it complete, undo what a try left unfinished, and say what a write added;
take a streaming query's micro-batches, appended or upserted by key, each exactly once across restarts; be read as
a stream of changes; say its current version (from its log, never its data) and be read as of a version."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs.cancellation import Cancellation

#: The column of an upsert's changes that says whether a change deletes its key's row (else it upserts it).
DELETED = "__spark_tables_deleted"


class FormatTables(Protocol):
    """The tables of one format, as CTAS and its cleanup use them."""

    def make(
        self,
        spark: SparkSession,
        job: CtasJob,
        frame: DataFrame,
        cancellation: Cancellation,
        *,
        replacing: bool,
        complete: bool,
        on_created: Callable[[], None],
    ) -> dict[str, Any]:
        """Make ``job``'s table from ``frame`` under its name, marked as its owner's, and complete at once if
        ``complete``; call ``on_created`` once something exists that a failure must undo. Returns what the outcome
        reports besides (``kept_files``)."""
        ...

    def complete(self, spark: SparkSession, job: CtasJob, marks: dict[str, str]) -> None:
        """Mark the table complete (``marks``: its properties now), once the job that made it has succeeded."""
        ...

    def undo_unfinished(
        self, spark: SparkSession, target: TableIdentifier, owner: TableOwner, *, up_to_try: int | None
    ) -> list[str]:
        """Put back what tries of ``owner``'s task (up to ``up_to_try``) left unfinished of ``target``; return what
        it did, in words."""
        ...

    def written(self, spark: SparkSession, job: CtasJob) -> dict[str, Any]:
        """Where ``job``'s table is (``location``, ``format``) and what its making wrote: ``rows`` and ``bytes``, and
        where the format keeps them, ``files`` and the ``version`` it committed."""
        ...

    def sink_table(
        self, spark: SparkSession, name: str, frame: DataFrame, checkpoint: str, *, writes: str
    ) -> SinkTable:
        """Catalog table ``name`` as the sink of the streaming query whose checkpoint is ``checkpoint``, checked to
        take the columns and types of ``frame`` (the query's data columns) before the query starts: ``SpecError`` in
        one line when not, ``writes`` saying what the sink does."""
        ...

    def stream(self, spark: SparkSession, name: str) -> StreamedTable:
        """Catalog table ``name`` as a stream of changes, by Spark's streaming reader of its format."""
        ...

    def version(self, spark: SparkSession, table: TableIdentifier) -> TableVersion | None:
        """The table's current version, read from its log without reading its data; None where the format keeps
        no versions."""
        ...

    def read(self, spark: SparkSession, table: TableIdentifier, version: TableVersion | None) -> DataFrame:
        """The table's rows as of ``version`` (one ``version`` gave), or as they are (None)."""
        ...


@dataclass(frozen=True)
class StreamedTable:
    """A table read as a stream: its changes (the data columns and the row kind, ``jobs.changelog``), and whether
    they are all inserts."""

    changes: DataFrame
    insert_only: bool


@dataclass(frozen=True)
class BatchWrite:
    """What writing one micro-batch into a table did: whether it committed anything (one set of files moved into
    the table, one version switched to, one Delta commit), the rows it sent and the data files it added."""

    committed: bool = False
    rows_appended: int = 0
    #: An upsert's rows (each key's last change but deletes) and the keys it deleted (a key the table lacks counts).
    rows_upserted: int = 0
    rows_deleted: int = 0
    files_written: int = 0


class SinkTable(Protocol):
    """A catalog table a streaming query writes, a micro-batch at a time, from ``foreachBatch`` (where a session mode
    job's copy of it runs on the Spark Connect server: it holds no Spark session). A batch Spark runs again (it does
    so with the last batch of a checkpoint whose query stopped before committing it) is written once: ``None`` when
    the table has it already, and the caller then runs the batch's plan without writing it."""

    #: The table's columns, in its order.
    columns: list[str]

    def append(self, spark: SparkSession, batch: DataFrame, *, query_id: str, batch_id: int) -> BatchWrite | None:
        """Append the batch's rows (the table's columns of ``batch``)."""
        ...

    def upsert(
        self, spark: SparkSession, changes: DataFrame, key: Sequence[str], *, query_id: str, batch_id: int
    ) -> BatchWrite | None:
        """Apply ``changes``, a row per key of ``key``: the table's columns and ``DELETED`` (true: remove the key's
        row; false: upsert it)."""
        ...
