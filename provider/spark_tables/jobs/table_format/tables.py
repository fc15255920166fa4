"""What a capability asks of the tables of one format: make a CTAS's table (created, filled and given its name,
atomically where the format can), mark it complete, undo what a try left unfinished, and say what a write added."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.jobs.cancellation import Cancellation


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
