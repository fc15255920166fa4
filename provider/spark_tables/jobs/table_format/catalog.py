"""Catalog operations on tables of any format, through Spark SQL, and the files of a table the provider made
(``jobs.files``): what each format's tables build on."""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from spark_tables.core.ctas.ownership import LOCATION, LOCATION_CLAIM, TableOwner
from spark_tables.core.errors import JobError
from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.jobs import files

log = logging.getLogger(__name__)


def exists(spark: SparkSession, table: TableIdentifier) -> bool:
    return spark.catalog.tableExists(table.quoted())


def properties(spark: SparkSession, table: TableIdentifier) -> dict[str, str] | None:
    """The table's properties, or None if there is no such table."""
    if not exists(spark, table):
        return None
    return {row[0]: row[1] for row in spark.sql(f"SHOW TBLPROPERTIES {table.quoted()}").collect()}


def set_properties(spark: SparkSession, table: TableIdentifier, values: dict[str, str]) -> None:
    spark.sql(f"ALTER TABLE {table.quoted()} SET TBLPROPERTIES ({property_list(values)})")


def rename(spark: SparkSession, table: TableIdentifier, new_name: TableIdentifier) -> None:
    log.info("renaming %s to %s", table, new_name)
    spark.sql(f"ALTER TABLE {table.quoted()} RENAME TO {new_name.quoted()}")


def details(spark: SparkSession, table: TableIdentifier) -> dict[str, str] | None:
    """The table's detailed information (``Provider``, ``Type``, ``Location``, ...) from ``DESCRIBE TABLE
    EXTENDED``'s rows, which every format answers (its ``AS JSON`` form only Spark's own); None if there is no such
    table."""
    if not exists(spark, table):
        return None
    return {str(row[0]): str(row[1]) for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table.quoted()}").collect()}


def provider(spark: SparkSession, table: TableIdentifier) -> str | None:
    """The table's format (its ``USING``: ``parquet``, ``delta``, ...), or None if there is no such table."""
    found = details(spark, table) or {}
    return found.get("Provider", "").lower() or None


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
    details = _details(spark, table)
    if details is None:  # dropped meanwhile, by another cleanup of the same try
        return
    location = details.get("location")
    if location and _files_made_by(owner, details, properties(spark, table) or {}):
        files.remove(location)
        kept = ""
    else:
        kept = f", keeping the files under {location}, which are not its own" if location else ""
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted()}")
    log.info("dropped %s%s", table, kept or (f" and its files under {location}" if location else ""))


def drop_kept(spark: SparkSession, table: TableIdentifier) -> str | None:
    """Drop a table this provider did not make, as Spark's DROP TABLE does: a managed table's files go with it, an
    external table's stay. Returns the location of the files kept, if any."""
    details = _details(spark, table)
    if details is None:
        return None
    spark.sql(f"DROP TABLE IF EXISTS {table.quoted()}")
    kept = details.get("location") if details.get("type") == "EXTERNAL" else None
    log.info("dropped %s%s", table, f"; it is external: its files under {kept} are kept" if kept else "")
    return kept


def external_location(spark: SparkSession, table: TableIdentifier) -> str | None:
    """The location of an external table (its files are not Spark's to delete); None for a managed table."""
    details = _details(spark, table)
    return details.get("location") if details is not None and details.get("type") == "EXTERNAL" else None


def _details(spark: SparkSession, table: TableIdentifier) -> dict[str, Any] | None:
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
    return location_claimant(location) == owner.task()


def claim_location(location: str, table: TableIdentifier, owner: TableOwner) -> None:
    """Claim an explicit LOCATION for the task's table before creating it: it must hold no file, and no other task
    may claim it meanwhile (the claim file is created exclusively). A claim this task left in an earlier try is
    taken over. Raises ``JobError`` in one line otherwise."""
    claim = _claim_file(location)
    names = files.list_names(location) if files.exists(location) else []
    if names == [LOCATION_CLAIM] and location_claimant(location) == owner.task():
        log.info("location %s was claimed by an earlier try of this task: taking it over", location)
        return
    if names:
        claimant = location_claimant(location) if LOCATION_CLAIM in names else None
        if claimant is not None:
            raise JobError(
                f"location {location} is claimed by task {_task_words(claimant)}: CTAS writes only to a location "
                f"no other task holds; choose another (if that task has ended, remove its claim {claim} to free the "
                "location)"
            )
        raise JobError(
            f"location {location} is not empty: CTAS writes only to an empty location, so that a failure can "
            "remove what it wrote; choose another, or empty it"
        )
    text = json.dumps({"table": str(table), "task": owner.task()})
    if not files.create_exclusive(claim, text.encode()):
        claimant = location_claimant(location)
        raise JobError(
            f"location {location} was claimed meanwhile by task {_task_words(claimant or {})}: choose another"
        )
    log.info("claimed location %s for %s", location, table)


def release_location(location: str, owner: TableOwner) -> None:
    """Remove the task's claim of a LOCATION where no table of the task holds it; another task's claim is left."""
    if location_claimant(location) == owner.task():
        files.remove(_claim_file(location))
        log.info("released the claim of location %s", location)


def location_claimant(location: str) -> dict[str, Any] | None:
    """The task a LOCATION's claim names (dag, run, task, map index); None without a readable claim."""
    try:
        data = json.loads(files.read_text(_claim_file(location)))
    except (FileNotFoundError, ValueError):
        return None
    task = data.get("task") if isinstance(data, dict) else None
    return task if isinstance(task, dict) else None


def _claim_file(location: str) -> str:
    return f"{location.rstrip('/')}/{LOCATION_CLAIM}"


def _task_words(task: dict[str, Any]) -> str:
    return f"{task.get('dag_id')}.{task.get('task_id')} of run {task.get('run_id')}"


def property_list(values: dict[str, str]) -> str:
    return ", ".join(f"{sql_string(key)} = {sql_string(value)}" for key, value in values.items())


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def column_list(schema: StructType) -> str:
    """The schema as the column list of ``CREATE TABLE``; names quoted at every depth."""
    return ", ".join(f"{quote_part(field.name)} {_type(field.dataType)}" for field in schema.fields)


def _type(data_type: DataType) -> str:
    if isinstance(data_type, StructType):
        return "STRUCT<" + ", ".join(f"{quote_part(f.name)}: {_type(f.dataType)}" for f in data_type.fields) + ">"
    if isinstance(data_type, ArrayType):
        return f"ARRAY<{_type(data_type.elementType)}>"
    if isinstance(data_type, MapType):
        return f"MAP<{_type(data_type.keyType)}, {_type(data_type.valueType)}>"
    return data_type.simpleString()
