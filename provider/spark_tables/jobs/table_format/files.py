"""Spark's own file formats (parquet, ORC, JSON, CSV, Avro, text) in Hive-format tables: a folder of files, no log
of commits. A CTAS's table is created marked as its try's, filled, and analysed; at atomicity ``staging`` it is made
under a staging name beside the target and renamed onto it (a replace moves the old table aside for the swap, and
drops it once the job has succeeded). Rows and bytes come from the catalog's statistics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasJob
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
from spark_tables.core.errors import JobError
from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.jobs import files
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.table_format import catalog

log = logging.getLogger(__name__)


class FileTables:
    """Hive-format tables of Spark's file formats (``FormatTables``)."""

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
        target = job.identifier
        # A replaced external table is dropped as Spark drops it: its files stay where another system wrote them.
        kept = catalog.external_location(spark, target) if replacing else None
        name = staging_table(target, job.owner) if job.atomicity == "staging" else target
        if job.location is not None:
            catalog.claim_location(job.location, target, job.owner)
        try:
            _create(spark, name, frame, job)
        except BaseException:
            if job.location is not None:  # no table holds the location: the claim goes, the folder is free again
                catalog.release_location(job.location, job.owner)
            raise
        on_created()
        if job.location is not None:
            _check_location(spark, name, job.location, job.owner)
        cancellation.check()
        _fill(spark, name, frame)
        cancellation.check()
        catalog.analyze(spark, name)
        if name != target:
            _publish(spark, name, target, job.owner, replacing=replacing, complete=complete)
        if complete:
            self.complete(spark, job, catalog.properties(spark, target) or {})
        return {"kept_files": kept} if kept else {}

    def complete(self, spark: SparkSession, job: CtasJob, marks: dict[str, str]) -> None:
        """Mark the table complete and drop the table a replace moved aside."""
        if marks.get(STATE) != COMPLETE:
            catalog.set_properties(spark, job.identifier, {STATE: COMPLETE})
        if marks.get(REPLACED):
            catalog.drop_kept(spark, replaced_table(job.identifier, job.owner))

    def undo_unfinished(
        self, spark: SparkSession, target: TableIdentifier, owner: TableOwner, *, up_to_try: int | None
    ) -> list[str]:
        """Drop an unfinished table and staging table of the task, and give a table a swap moved aside its name
        back (or drop it, if the swap finished but for that); touch only tables with the task's marks or names."""
        done: list[str] = []
        staging, replaced = staging_table(target, owner), replaced_table(target, owner)
        target_marks = catalog.properties(spark, target)
        staging_marks = catalog.properties(spark, staging)
        later_try_swapping = (
            staging_marks is not None
            and owner.is_same_task(staging_marks)
            and not owner.made(staging_marks, up_to_try=up_to_try)
        )
        if owner.made(target_marks, up_to_try=up_to_try) and target_marks.get(STATE) != COMPLETE:
            catalog.drop_made(spark, target, owner)
            done.append(f"dropped the unfinished {target} of try {owner_try(target_marks)}")
            target_marks = None  # the name is free: a table its replace moved aside comes back, below
        if target_marks is None and not later_try_swapping and catalog.exists(spark, replaced):
            catalog.rename(spark, replaced, target)  # a swap undone or cut short: the old table gets its name back
            done.append(f"restored the replaced table {target}")
        elif (
            owner.made(target_marks, up_to_try=up_to_try)
            and target_marks.get(REPLACED)
            and catalog.exists(spark, replaced)
        ):
            catalog.drop_kept(spark, replaced)  # the swap finished but for dropping the table it replaced
            done.append(f"dropped {replaced}, which {target} replaced")
        if owner.made(staging_marks, up_to_try=up_to_try):
            catalog.drop_made(spark, staging, owner)
            done.append(f"dropped the staging table {staging} of try {owner_try(staging_marks)}")
        return done

    def written(self, spark: SparkSession, job: CtasJob) -> dict[str, Any]:
        """Rows and bytes from the catalog's statistics, which ``make`` computed."""
        details = catalog.describe(spark, job.identifier)
        rows, size = catalog.statistics(details)
        return {"location": details.get("location"), "format": details.get("provider"), "rows": rows, "bytes": size}


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
        clauses.append(f"LOCATION {catalog.sql_string(job.location)}")
    if job.comment is not None:
        clauses.append(f"COMMENT {catalog.sql_string(job.comment)}")
    clauses.append(f"TBLPROPERTIES ({catalog.property_list({**job.properties, **marks})})")
    spark.sql(f"CREATE TABLE {name.quoted()} ({catalog.column_list(frame.schema)}) {' '.join(clauses)}")
    log.info("created %s, owned by %s", name, job.owner.describe())


def _check_location(spark: SparkSession, name: TableIdentifier, location: str, owner: TableOwner) -> None:
    """The table must be where the claim is: a path without a scheme is resolved by Spark against Hadoop's default
    file system, which may not be the local one the claim went to."""
    resolved = catalog.describe(spark, name).get("location") or ""
    if not files.same_location(resolved, location):
        catalog.release_location(location, owner)
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
    ``complete`` drops it.

    ``complete``: mark the table complete first (a ``ctas`` job), so that the name never shows it unfinished.
    """
    replaced = replaced_table(target, owner)
    marks = {**({STATE: COMPLETE} if complete else {}), **({REPLACED: str(replaced)} if replacing else {})}
    if marks:
        catalog.set_properties(spark, staging, marks)
    if replacing:
        catalog.rename(spark, target, replaced)
    catalog.rename(spark, staging, target)


FILE_TABLES = FileTables()
