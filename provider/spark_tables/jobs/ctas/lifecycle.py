"""FLIP-218's job status hooks for CTAS, run inside the Spark application: the ``ctas`` and ``ctas_cleanup`` jobs,
and the steps (``CtasTable``) the ``sql`` job runs for each of its ``CREATE TABLE ... AS SELECT`` statements.

- created: the query is analysed (not run) and the table is created with its schema, marked as this try's.
- finished: the rows are written and statistics computed; at level ``staging`` the staging table is given the
  final name (for a replace, swapped in, the old table moved aside). The table is marked complete, and a table
  it replaced dropped, once the job that made it has succeeded: a ``ctas`` job at once (at level ``staging``
  before the rename), a ``sql`` job after its last statement.
- failed or cancelled: what this try created is dropped with its files (a replaced table given its name back),
  and the job fails with the error.

Every try starts by undoing what earlier tries of the same task left unfinished, so retries are safe; the
``ctas_cleanup`` job runs the same undo from outside, for a try that died before it could clean up.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import (
    COMPLETE,
    FILLING,
    LOCATION,
    REPLACED,
    STATE,
    TARGET,
    TableOwner,
    owner_try,
    replaced_table,
    staging_table,
)
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult, SweptClaim
from spark_tables.core.errors import JobError, one_line
from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.core.job_output import JobOutput
from spark_tables.jobs import files
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.ctas import catalog_tables
from spark_tables.jobs.row_frames import rows

log = logging.getLogger(__name__)

#: Spark's error conditions when creating or renaming onto a name fails because the name is taken (see
#: ``_taken_by_another``).
_NAME_TAKEN_CONDITIONS = ("TABLE_OR_VIEW_ALREADY_EXISTS", "_LEGACY_ERROR_TEMP_3065")


class NameTaken(JobError):
    """Another task created a table under the name, free when this one looked, while this one was making its own."""


class CtasFailed(JobError):
    """A job that makes CTAS tables failed, and left none of its own unfinished; ``output`` says what it undid."""

    def __init__(self, message: str, output: JobOutput) -> None:
        super().__init__(message)
        self.output = output


class CtasTable:
    """One CTAS's table through its lifecycle, in the steps of the job that makes it: ``make`` (created marked as
    this try's, filled, given its name), then ``complete`` once the job has succeeded, or, when it fails,
    ``undo_unfinished``.

    A ``ctas`` job is complete when its table is filled; a ``sql`` job only when its last statement has run, so
    its CTAS tables stay marked ``filling`` (and a table a replace moved aside stays) until then.
    """

    def __init__(self, spark: SparkSession, job: CtasJob) -> None:
        self.spark = spark
        self.job = job
        #: Whether this try created the table (or its staging table): what a failure has to undo.
        self.created = False

    def make(self, cancellation: Cancellation, *, complete: bool) -> dict[str, Any]:
        """Make the table, marked complete at once if ``complete``; return what happened, for XCom: ``created``,
        and ``replaced``, ``reused_from_try`` or ``skipped``.

        Raises ``NameTaken`` if another task takes the name meanwhile (with IF NOT EXISTS: skipped instead).
        """
        spark, job, target, owner = self.spark, self.job, self.job.identifier, self.job.owner
        existing = catalog_tables.properties(spark, target)
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
        # A replaced external table is dropped as Spark drops it: its files stay where another system wrote them.
        kept = catalog_tables.external_location(spark, target) if existing is not None else None
        try:
            self._build(cancellation, replacing=existing is not None, complete=complete)
        except Exception as err:
            if existing is not None or not _taken_by_another(spark, target, owner, err):
                raise
            if not job.if_not_exists:
                raise NameTaken(
                    f"table {target} was created meanwhile by another task, whose table is left as it is"
                ) from err
            log.info("%s was created meanwhile by another task, and IF NOT EXISTS was given", target)
            undone = undo_unfinished(spark, target, owner) if self.created else []
            self.created = False
            return {"created": False, "skipped": "table created meanwhile by another task", "undone": undone}
        return {"created": True, "replaced": existing is not None, **({"kept_files": kept} if kept else {})}

    def _build(self, cancellation: Cancellation, *, replacing: bool, complete: bool) -> None:
        spark, job, target = self.spark, self.job, self.job.identifier
        # Analysed, not run: a query that does not analyse fails before anything exists.
        frame = rows(spark, job.query, job.producer)
        _check_before_creating(job, frame)
        cancellation.check()
        name = staging_table(target, job.owner) if job.atomicity == "staging" else target
        if job.location is not None:
            catalog_tables.claim_location(job.location, target, job.owner)
        try:
            _create(spark, name, frame, job)
        except BaseException:
            if job.location is not None:  # no table holds the location: the claim goes, the folder is free again
                catalog_tables.release_location(job.location, job.owner)
            raise
        self.created = True
        if job.location is not None:
            _check_location(spark, name, job.location, job.owner)
        cancellation.check()
        _fill(spark, name, frame)
        cancellation.check()
        catalog_tables.analyze(spark, name)
        if name != target:
            _publish(spark, name, target, job.owner, replacing=replacing, complete=complete)
        if complete:
            self.complete()

    def complete(self) -> None:
        """Mark the table complete and drop the table a replace moved aside: the job that made it has succeeded."""
        spark, target, owner = self.spark, self.job.identifier, self.job.owner
        marks = catalog_tables.properties(spark, target)
        if marks is None or not owner.is_same_task(marks):  # a later statement of the job dropped or renamed it
            log.warning("%s is no longer a table of this task: there is nothing to mark complete", target)
            return
        if marks.get(STATE) != COMPLETE:
            catalog_tables.set_properties(spark, target, {STATE: COMPLETE})
        if marks.get(REPLACED):
            catalog_tables.drop_kept(spark, replaced_table(target, owner))

    def finished(self) -> dict[str, Any]:
        """Where the table is and what it holds: ``location``, ``format``, and ``rows`` and ``bytes``."""
        return _finished(self.spark, self.job.identifier)


def run_ctas(spark: SparkSession, job: CtasJob, cancellation: Cancellation) -> CtasResult:
    target, owner = job.identifier, job.owner
    log.info("%s, for %s", job.describe(), owner.describe())
    result: dict[str, Any] = {"table": str(target), "atomicity": job.atomicity, "swept": sweep(spark, job.sweep)}
    table = CtasTable(spark, job)
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
    """Put back what tries of this task left half done; touch only tables with this task's marks or names.

    ``up_to_try``: leave tables of later tries alone (a cleanup from outside must not undo a retry at work).
    Returns what it did, in words. Safe to run at any point, any number of times.
    """
    done: list[str] = []
    staging, replaced = staging_table(target, owner), replaced_table(target, owner)

    def ours(marks: dict[str, str] | None) -> bool:
        if marks is None or not owner.is_same_task(marks):
            return False
        return up_to_try is None or not owner_try(marks).isdigit() or int(owner_try(marks)) <= up_to_try

    target_marks = catalog_tables.properties(spark, target)
    staging_marks = catalog_tables.properties(spark, staging)
    later_try_swapping = staging_marks is not None and owner.is_same_task(staging_marks) and not ours(staging_marks)
    if ours(target_marks) and target_marks.get(STATE) != COMPLETE:
        catalog_tables.drop_made(spark, target, owner)
        done.append(f"dropped the unfinished {target} of try {owner_try(target_marks)}")
        target_marks = None  # the name is free: a table its replace moved aside comes back, below
    if target_marks is None and not later_try_swapping and catalog_tables.exists(spark, replaced):
        catalog_tables.rename(spark, replaced, target)  # a swap undone or cut short: the old table gets its name back
        done.append(f"restored the replaced table {target}")
    elif ours(target_marks) and target_marks.get(REPLACED) and catalog_tables.exists(spark, replaced):
        catalog_tables.drop_kept(spark, replaced)  # the swap finished but for dropping the table it replaced
        done.append(f"dropped {replaced}, which {target} replaced")
    if ours(staging_marks):
        catalog_tables.drop_made(spark, staging, owner)
        done.append(f"dropped the staging table {staging} of try {owner_try(staging_marks)}")
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


def _create(spark: SparkSession, name: TableIdentifier, frame: DataFrame, job: CtasJob) -> None:
    marks = job.owner.properties(FILLING)
    if name != job.identifier:
        marks[TARGET] = str(job.identifier)
    if job.location is not None:
        marks[LOCATION] = job.location
    clauses = [f"USING {job.format}"]
    if job.partitioned_by:
        clauses.append(f"PARTITIONED BY ({', '.join(job.partitioned_by)})")
    if job.location is not None:
        clauses.append(f"LOCATION {catalog_tables.sql_string(job.location)}")
    if job.comment is not None:
        clauses.append(f"COMMENT {catalog_tables.sql_string(job.comment)}")
    clauses.append(f"TBLPROPERTIES ({catalog_tables.property_list({**job.properties, **marks})})")
    spark.sql(f"CREATE TABLE {name.quoted()} ({catalog_tables.column_list(frame.schema)}) {' '.join(clauses)}")
    log.info("created %s, owned by %s", name, job.owner.describe())


def _check_location(spark: SparkSession, name: TableIdentifier, location: str, owner: TableOwner) -> None:
    """The table must be where the claim is: a path without a scheme is resolved by Spark against Hadoop's default
    file system, which may not be the local one the claim went to."""
    resolved = catalog_tables.describe(spark, name).get("location") or ""
    if not files.same_location(resolved, location):
        catalog_tables.release_location(location, owner)
        raise JobError(
            f"location {location} is {resolved} to Spark (Hadoop's default file system): give it as that full URI"
        )


def _fill(spark: SparkSession, name: TableIdentifier, frame: DataFrame) -> None:
    columns = spark.table(name.quoted()).columns  # partition columns come last in the table
    frame.select(*[quote_part(c) for c in columns]).write.insertInto(name.quoted())


def _publish(
    spark: SparkSession,
    staging: TableIdentifier,
    target: TableIdentifier,
    owner: TableOwner,
    *,
    replacing: bool,
    complete: bool,
) -> None:
    """Give the filled staging table the final name; a replace moves the old table aside, where it stays until
    ``CtasTable.complete`` drops it.

    ``complete``: mark the table complete first (a ``ctas`` job), so that the name never shows it unfinished.
    """
    replaced = replaced_table(target, owner)
    marks = {**({STATE: COMPLETE} if complete else {}), **({REPLACED: str(replaced)} if replacing else {})}
    if marks:
        catalog_tables.set_properties(spark, staging, marks)
    if replacing:
        catalog_tables.rename(spark, target, replaced)
    catalog_tables.rename(spark, staging, target)


def _finished(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    details = catalog_tables.describe(spark, table)
    rows, size = catalog_tables.statistics(details)
    return {"location": details.get("location"), "format": details.get("provider"), "rows": rows, "bytes": size}


def _taken_by_another(spark: SparkSession, target: TableIdentifier, owner: TableOwner, err: BaseException) -> bool:
    """Whether creating or renaming onto the free name ``target`` failed because another task took it meanwhile.

    Spark refuses a taken name with ``TABLE_OR_VIEW_ALREADY_EXISTS``; when the name is taken between Spark's own
    check and its metastore call, the metastore refuses and Spark passes that on as ``_LEGACY_ERROR_TEMP_3065``
    (any metastore error). Either way the catalog then decides: a table under the name that this task did not
    create.
    """
    if not (isinstance(err, AnalysisException) and err.getCondition() in _NAME_TAKEN_CONDITIONS):
        return False
    marks = catalog_tables.properties(spark, target)
    return marks is not None and not owner.is_same_task(marks)
