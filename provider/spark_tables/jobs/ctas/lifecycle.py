"""FLIP-218's job status hooks for CTAS, run inside the Spark application: the ``ctas`` and ``ctas_cleanup`` jobs,
and the steps (``CtasTable``) the ``sql`` job runs for each of its ``CREATE TABLE ... AS SELECT`` statements.

- created: the query is analysed (not run) and the table is created, marked as this try's.
- finished: the rows are written. Spark's file formats (``jobs.table_format.file_tables``) compute statistics, and at
  level ``staging`` give the staging table the final name (a replace swaps it in, the old table moved aside);
  Delta Lake (``jobs.table_format.delta``) creates or replaces the table in one commit. The table is marked
  complete (and a table a swap moved aside dropped) once the job that made it has succeeded: a ``ctas`` job at
  once, a ``sql`` job after its last statement.
- failed or cancelled: what this try created is dropped with its files (a replaced table given its name back, or
  its replaced version restored), and the job fails with the error.

Every try starts by undoing what earlier tries of the same task left unfinished, so retries are safe; the
``ctas_cleanup`` job runs the same undo from outside, for a try that died before it could clean up.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import (
    COMPLETE,
    STATE,
    TableOwner,
    owner_try,
)
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult, SweptClaim
from spark_tables.core.errors import JobError, one_line
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.job_output import JobOutput
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.row_frames import rows
from spark_tables.jobs.table_format import catalog
from spark_tables.jobs.table_format.choice import session_default_format, tables_for, tables_of

log = logging.getLogger(__name__)


class NameTaken(JobError):
    """Another task created a table under the name, free when this one looked, while this one was making its own."""


class CtasFailed(JobError):
    """A job that makes CTAS tables failed, and left none of its own unfinished; ``output`` says what it undid."""

    def __init__(self, message: str, output: JobOutput) -> None:
        super().__init__(message)
        self.output = output


class CtasTable:
    """One CTAS's table through its lifecycle, in the steps of the job that makes it: ``make`` (created marked as
    this try's, filled, given its name: its format's tables, ``jobs.table_format``, say how), then ``complete`` once
    the job has succeeded, or, when it fails, ``undo_unfinished``.

    A ``ctas`` job is complete when its table is filled; a ``sql`` job only when its last statement has run, so
    its CTAS tables stay marked ``filling`` (and what a replace keeps of the old table stays) until then.
    """

    def __init__(self, spark: SparkSession, job: CtasJob) -> None:
        self.spark = spark
        #: The job with its format: the catalog's default where it names none (``SpecError`` when that does not fit).
        self.job = job.with_format(session_default_format(spark))
        self.tables = tables_for(self.job.format)
        #: Whether this try created the table (or its staging table): what a failure has to undo.
        self.created = False

    def make(self, cancellation: Cancellation, *, complete: bool) -> dict[str, Any]:
        """Make the table, marked complete at once if ``complete``; return what happened, for XCom: ``created``,
        and ``replaced``, ``reused_from_try`` or ``skipped``.

        Raises ``NameTaken`` if another task takes the name meanwhile (with IF NOT EXISTS: skipped instead).
        """
        spark, job, target, owner = self.spark, self.job, self.job.identifier, self.job.owner
        existing = catalog.properties(spark, target)
        if existing is not None and owner.is_same_task(existing) and existing.get(STATE) == COMPLETE:
            log.info("%s was completed by try %s of this task: nothing to do", target, owner_try(existing))
            return {"created": False, "reused_from_try": owner_try(existing)}
        if existing is not None and not job.replace:
            if job.if_not_exists:
                log.info("%s exists and IF NOT EXISTS was given: the job does not run", target)
                return {"created": False, "skipped": "table exists"}
            raise JobError(
                f"table {target} already exists, and this task did not create it: use IF NOT EXISTS to skip, "
                "REPLACE TABLE to replace it, or another name"
            )
        if existing is not None:
            _check_same_format(spark, job)
        try:
            reported = self._build(cancellation, replacing=existing is not None, complete=complete)
        except Exception as err:
            if existing is not None or not _taken_by_another(spark, target, owner):
                raise
            if not job.if_not_exists:
                raise NameTaken(
                    f"table {target} was created meanwhile by another task, whose table is left as it is"
                ) from err
            log.info("%s was created meanwhile by another task, and IF NOT EXISTS was given", target)
            undone = undo_unfinished(spark, target, owner) if self.created else []
            self.created = False
            return {"created": False, "skipped": "table created meanwhile by another task", "undone": undone}
        return {"created": True, "replaced": existing is not None, **reported}

    def _build(self, cancellation: Cancellation, *, replacing: bool, complete: bool) -> dict[str, Any]:
        # Analysed, not run: a query that does not analyse fails before anything exists.
        frame = rows(self.spark, self.job.query, self.job.producer)
        _check_before_creating(self.job, frame)
        cancellation.check()
        return self.tables.make(
            self.spark, self.job, frame, cancellation, replacing=replacing, complete=complete, on_created=self._created
        )

    def _created(self) -> None:
        self.created = True

    def complete(self) -> None:
        """Mark the table complete (and drop what a replace kept of the old table): the job that made it has
        succeeded."""
        spark, target, owner = self.spark, self.job.identifier, self.job.owner
        marks = catalog.properties(spark, target)
        if marks is None or not owner.is_same_task(marks):  # a later statement of the job dropped or renamed it
            log.warning("%s is no longer a table of this task: there is nothing to mark complete", target)
            return
        self.tables.complete(spark, self.job, marks)

    def finished(self) -> dict[str, Any]:
        """Where the table is and what its making wrote: ``location``, ``format``, ``rows`` and ``bytes``, and
        ``files`` and ``version`` where the format keeps them."""
        return self.tables.written(self.spark, self.job)


def run_ctas(spark: SparkSession, job: CtasJob, cancellation: Cancellation) -> CtasResult:
    target, owner = job.identifier, job.owner
    table = CtasTable(spark, job)
    log.info("%s, for %s", table.job.describe(), owner.describe())
    result: dict[str, Any] = {"table": str(target), "atomicity": table.job.atomicity, "swept": sweep(spark, job.sweep)}
    try:
        result["undone_before"] = undo_unfinished(spark, target, owner)
        outcome = table.make(cancellation, complete=True)
    except Exception as err:
        undone = undo_unfinished(spark, target, owner) if table.created else []
        if cancellation.requested and not isinstance(err, NameTaken):  # a name taken meanwhile says more
            cause = f"cancelled: {cancellation.reason}"
        else:
            cause = one_line(err)
        note = undone_note(undone) if table.created else ""
        raise CtasFailed(cause + note, output=CtasResult(**result, undone=undone, cleaned_up=True)) from err
    if "skipped" in outcome:
        return CtasResult(**result, **outcome)
    finished = table.finished()
    if outcome["created"]:
        log.info("%s is complete: %s rows, %s bytes", target, finished["rows"], finished["bytes"])
    return CtasResult(**result, **finished, **outcome)


def run_ctas_cleanup(spark: SparkSession, job: CtasCleanupJob, cancellation: Cancellation) -> CtasCleanupResult:
    log.info("undoing what %s left unfinished of %s", job.owner.describe(), ", ".join(job.tables))
    return CtasCleanupResult(tables=list(job.tables), undone=_undo_claimed(spark, job))


def sweep(spark: SparkSession, cleanups: tuple[CtasCleanupJob, ...]) -> list[SweptClaim]:
    """Undo what lost tries of other tasks left (their claims); a failure is logged, and its claim kept for later."""
    return [_sweep(spark, cleanup) for cleanup in cleanups]


def _sweep(spark: SparkSession, cleanup: CtasCleanupJob) -> SweptClaim:
    swept = {"tables": list(cleanup.tables), "owner": dataclasses.asdict(cleanup.owner)}
    tables = ", ".join(cleanup.tables)
    try:
        undone = _undo_claimed(spark, cleanup)
    except Exception as err:
        log.warning("could not sweep %s of %s: %s", tables, cleanup.owner.describe(), one_line(err))
        return SweptClaim(**swept, undone=None)
    log.info("swept %s of %s: %s", tables, cleanup.owner.describe(), "; ".join(undone) or "nothing was left")
    return SweptClaim(**swept, undone=undone)


def _undo_claimed(spark: SparkSession, cleanup: CtasCleanupJob) -> list[str]:
    """Undo what the claimed try, and earlier tries of its task, left of its tables; never a later try's."""
    up_to_try = cleanup.owner.try_number
    return [
        line
        for table in cleanup.identifiers
        for line in undo_unfinished(spark, table, cleanup.owner, up_to_try=up_to_try)
    ]


def undone_note(undone: list[str]) -> str:
    """What a failed job undid, to end its error line with."""
    return f" (undone: {'; '.join(undone) or 'nothing was left'})"


def undo_unfinished(
    spark: SparkSession, target: TableIdentifier, owner: TableOwner, *, up_to_try: int | None = None
) -> list[str]:
    """Put back what tries of this task left half done, as the table's format does; touch only tables with this
    task's marks or names.

    ``up_to_try``: leave tables of later tries alone (a cleanup from outside must not undo a retry at work).
    Returns what it did, in words. Safe to run at any point, any number of times.
    """
    done = tables_of(spark, target).undo_unfinished(spark, target, owner, up_to_try=up_to_try)
    for line in done:
        log.warning("cleanup: %s", line)
    return done


def _check_before_creating(job: CtasJob, frame: DataFrame) -> None:
    columns = {c.lower() for c in frame.columns}
    missing = [c for c in job.partitioned_by if c.lower() not in columns]
    if missing:
        raise JobError(f"partition column(s) {missing} are not in the query's columns {frame.columns}")
    if job.partitioned_by and len(job.partitioned_by) == len(columns):
        raise JobError("every column is a partition column: leave at least one column out of PARTITIONED BY")


def _check_same_format(spark: SparkSession, job: CtasJob) -> None:
    """A replace keeps the table's format where formats differ in how they replace (Delta replaces in place, keeping
    the old version; Spark's file formats swap tables): one line, before anything is written."""
    existing = catalog.provider(spark, job.identifier) or ""
    if tables_for(existing) is not tables_for(job.format):
        raise JobError(
            f"table {job.identifier} is a {existing} table, and REPLACE TABLE ... USING {job.format} would change its "
            f"format: replace it USING {existing}, or drop it first to make it anew as {job.format}"
        )


def _taken_by_another(spark: SparkSession, target: TableIdentifier, owner: TableOwner) -> bool:
    """Whether making the table under the free name ``target`` failed because another task took it meanwhile: the
    catalog decides, as the errors differ by where the other won. Spark refuses a taken name with
    ``TABLE_OR_VIEW_ALREADY_EXISTS``, or, taken between Spark's own check and its metastore call, passes the
    metastore's refusal on as ``_LEGACY_ERROR_TEMP_3065`` (any metastore error); Delta fails the loser's commit on
    the folder both wrote to (``DELTA_PROTOCOL_CHANGED``). Taken: a table under the name that this task did not
    create.
    """
    marks = catalog.properties(spark, target)
    return marks is not None and not owner.is_same_task(marks)
