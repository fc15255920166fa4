"""Spark's own file formats (parquet, ORC, JSON, CSV, Avro, text) in Hive-format tables: a folder of files, no log
of commits. A CTAS's table is created marked as its try's, filled, and analysed; at atomicity ``staging`` it is made
under a staging name beside the target and renamed onto it (a replace moves the old table aside for the swap, and
drops it once the job has succeeded). Rows and bytes come from the catalog's statistics."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pyspark.errors import AnalysisException
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
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs import files
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.changelog import insert_only
from spark_tables.jobs.table_format import catalog, location_claims
from spark_tables.jobs.table_format.file_streams import FileSinkTable, file_sink_table
from spark_tables.jobs.table_format.tables import StreamedTable

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
        kept = external_location(spark, target) if replacing else None
        name = staging_table(target, job.owner) if job.atomicity == "staging" else target
        if job.location is not None:
            location_claims.claim_location(job.location, target, job.owner)
        try:
            _create(spark, name, frame, job)
        except BaseException:
            if job.location is not None:  # no table holds the location: the claim goes, the folder is free again
                location_claims.release_location(job.location, job.owner)
            raise
        on_created()
        if job.location is not None:
            _check_location(spark, name, job.location, job.owner)
        cancellation.check()
        _fill(spark, name, frame)
        cancellation.check()
        analyze(spark, name)
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
            drop_kept(spark, replaced_table(job.identifier, job.owner))

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
            drop_made(spark, target, owner)
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
            drop_kept(spark, replaced)  # the swap finished but for dropping the table it replaced
            done.append(f"dropped {replaced}, which {target} replaced")
        if owner.made(staging_marks, up_to_try=up_to_try):
            drop_made(spark, staging, owner)
            done.append(f"dropped the staging table {staging} of try {owner_try(staging_marks)}")
        return done

    def written(self, spark: SparkSession, job: CtasJob) -> dict[str, Any]:
        """Rows and bytes from the catalog's statistics, which ``make`` computed."""
        details = describe(spark, job.identifier)
        rows, size = statistics(details)
        return {"location": details.get("location"), "format": details.get("provider"), "rows": rows, "bytes": size}

    def sink_table(
        self, spark: SparkSession, name: str, frame: DataFrame, checkpoint: str, *, writes: str
    ) -> FileSinkTable:
        return file_sink_table(spark, name, frame, checkpoint, writes=writes)

    def stream(self, spark: SparkSession, name: str) -> StreamedTable:
        """The files added to the table's folder, as inserts (or any source Spark streams: rate, a view)."""
        return StreamedTable(insert_only(spark.readStream.table(TableIdentifier.parse(name).quoted())), True)

    def version(self, spark: SparkSession, table: TableIdentifier) -> TableVersion | None:
        """None: a folder of files keeps no versions."""
        return None

    def read(self, spark: SparkSession, table: TableIdentifier, version: TableVersion | None) -> DataFrame:
        return spark.table(table.quoted())


def describe(spark: SparkSession, table: TableIdentifier) -> dict[str, Any]:
    """``DESCRIBE TABLE EXTENDED ... AS JSON`` (Spark's own formats): ``location``, ``provider``, ``type``,
    ``statistics``, ..."""
    return json.loads(spark.sql(f"DESCRIBE TABLE EXTENDED {table.quoted()} AS JSON").head()[0])


def analyze(spark: SparkSession, table: TableIdentifier) -> None:
    """Compute rows and bytes into the catalog, where ``statistics`` reads them and Spark's optimizer uses them."""
    spark.sql(f"ANALYZE TABLE {table.quoted()} COMPUTE STATISTICS")


def statistics(details: dict[str, Any]) -> tuple[int | None, int | None]:
    """Rows and bytes from ``describe``, when the table has been analysed."""
    found = details.get("statistics") or {}
    return found.get("num_rows"), found.get("size_in_bytes")


def drop_made(spark: SparkSession, table: TableIdentifier, owner: TableOwner) -> None:
    """Drop a table tries of ``owner``'s task made, with its files where they are the task's: a managed table's
    folder (Spark made it for the table), or an explicit LOCATION that the table's marks and the claim there both
    give to the task. Files go first, so that the entry outlives them if this is cut short; files that are not the
    task's are left where they are, as Spark's DROP TABLE leaves an external table's."""
    details = _described(spark, table)
    if details is None:  # dropped meanwhile, by another cleanup of the same try
        return
    location = details.get("location")
    if location and _files_made_by(owner, details, catalog.properties(spark, table) or {}):
        files.remove(location)
        kept = ""
    else:
        kept = f", keeping the files under {location}, which are not its own" if location else ""
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted()}")
    log.info("dropped %s%s", table, kept or (f" and its files under {location}" if location else ""))


def drop_kept(spark: SparkSession, table: TableIdentifier) -> str | None:
    """Drop a table this provider did not make, as Spark's DROP TABLE does: a managed table's files go with it, an
    external table's stay. Returns the location of the files kept, if any."""
    details = _described(spark, table)
    if details is None:
        return None
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted()}")
    kept = details.get("location") if details.get("type") == "EXTERNAL" else None
    log.info("dropped %s%s", table, f"; it is external: its files under {kept} are kept" if kept else "")
    return kept


def external_location(spark: SparkSession, table: TableIdentifier) -> str | None:
    """The location of an external table (its files are not Spark's to delete); None for a managed table."""
    details = _described(spark, table)
    return details.get("location") if details is not None and details.get("type") == "EXTERNAL" else None


def _described(spark: SparkSession, table: TableIdentifier) -> dict[str, Any] | None:
    try:
        return describe(spark, table)
    except AnalysisException as err:
        if err.getCondition() == "TABLE_OR_VIEW_NOT_FOUND":
            return None
        raise


def _files_made_by(owner: TableOwner, details: dict[str, Any], marks: dict[str, str]) -> bool:
    """Whether the table's files are the task's: it made the table (its marks), and the folder is a managed table's
    or the LOCATION the task claimed (its mark, and the claim file there, name the task)."""
    if not owner.is_same_task(marks):
        return False
    if details.get("type") != "EXTERNAL":
        return True
    location = details["location"]
    if LOCATION not in marks or not files.same_location(marks[LOCATION], location):
        return False
    return location_claims.location_claimant(location) == owner.task()


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
    resolved = describe(spark, name).get("location") or ""
    if not files.same_location(resolved, location):
        location_claims.release_location(location, owner)
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
