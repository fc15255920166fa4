"""Delta Lake tables, through Delta's session catalog (``DeltaCatalog``) and SQL, so that the same statements run
under spark-submit and over Spark Connect.

A CTAS is Delta's own atomic ``CREATE TABLE ... AS SELECT``: the table exists once its one commit has succeeded,
with the owner's marks in that commit, and a failed or stopped one leaves no table (the data files it wrote stay
unreferenced in the folder, as Delta leaves them, until a VACUUM). A REPLACE is Delta's ``REPLACE TABLE ... AS
SELECT``: one commit, the old version current and readable until then and kept in the history after; an unfinished
replace is undone with ``RESTORE``. Rows, bytes and files come from the commit's metrics, read from its file in the
table's log (or the table's history), never from a scan."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.ownership import (
    COMPLETE,
    FILLING,
    LOCATION,
    REPLACED_VERSION,
    STATE,
    TableOwner,
    owner_try,
)
from spark_tables.core.errors import JobError
from spark_tables.core.identifiers import TableIdentifier, quote_part
from spark_tables.core.table_format.delta import DELTA
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs import files
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.table_format import catalog, delta_log
from spark_tables.jobs.table_format.delta_streams import DeltaSinkTable, delta_sink_table, delta_stream
from spark_tables.jobs.table_format.tables import StreamedTable

log = logging.getLogger(__name__)

#: The operations of Delta's history that make a table from a query, whose metrics ``written`` reports.
_MAKING_OPERATIONS = ("CREATE TABLE AS SELECT", "REPLACE TABLE AS SELECT", "CREATE OR REPLACE TABLE AS SELECT")
#: How far back ``written`` looks for the making commit: a sql job's completion mark commits after it (and, rarely,
#: another writer's commit).
_HISTORY_LOOKBACK = 3


class DeltaTables:
    """Delta Lake tables (``FormatTables``)."""

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
        check_loaded(spark)
        target = job.identifier
        marks = job.owner.properties(COMPLETE if complete else FILLING)
        if replacing:
            marks[REPLACED_VERSION] = str(self.version(spark, target).number)
        if job.location is not None:
            marks[LOCATION] = job.location
        clauses = ["USING delta"]
        if job.partitioned_by:
            clauses.append(f"PARTITIONED BY ({', '.join(quote_part(c) for c in job.partitioned_by)})")
        if job.location is not None:
            clauses.append(f"LOCATION {catalog.sql_string(job.location)}")
        if job.comment is not None:
            clauses.append(f"COMMENT {catalog.sql_string(job.comment)}")
        clauses.append(f"TBLPROPERTIES ({catalog.property_list({**job.properties, **marks})})")
        view = f"spark_tables_ctas_{uuid.uuid4().hex}"
        frame.createOrReplaceTempView(view)
        try:
            cancellation.check()
            verb = "REPLACE TABLE" if replacing else "CREATE TABLE"
            spark.sql(f"{verb} {target.quoted()} {' '.join(clauses)} AS SELECT * FROM {view}")
        finally:
            spark.catalog.dropTempView(view)
        on_created()
        if replacing:
            log.info(
                "replaced %s in one Delta commit (version %s stays in its history), owned by %s",
                target,
                marks[REPLACED_VERSION],
                job.owner.describe(),
            )
        else:
            log.info("created %s in one Delta commit, owned by %s", target, job.owner.describe())
        return {}

    def complete(self, spark: SparkSession, job: CtasJob, marks: dict[str, str]) -> None:
        """Mark the table complete: a commit of its own, after the making one (a ``sql`` job's)."""
        if marks.get(STATE) != COMPLETE:
            catalog.set_properties(spark, job.identifier, {STATE: COMPLETE})

    def undo_unfinished(
        self, spark: SparkSession, target: TableIdentifier, owner: TableOwner, *, up_to_try: int | None
    ) -> list[str]:
        """Restore the version an unfinished replace of the task replaced, or drop an unfinished table it created
        (with its folder at a LOCATION of its own: Delta created the table there only in an empty folder)."""
        marks = catalog.properties(spark, target)
        if not owner.made(marks, up_to_try=up_to_try) or marks.get(STATE) == COMPLETE:
            return []
        made_by = owner_try(marks)
        if REPLACED_VERSION in marks:
            replaced = int(marks[REPLACED_VERSION])
            spark.sql(f"RESTORE TABLE {target.quoted()} TO VERSION AS OF {replaced}")
            return [f"restored version {replaced} of {target}, which the unfinished replace of try {made_by} replaced"]
        found = catalog.details(spark, target) or {}
        location = found.get("Location", "")
        own_folder = found.get("Type") == "EXTERNAL" and files.same_location(marks.get(LOCATION, ""), location)
        spark.sql(f"DROP TABLE IF EXISTS {target.quoted()}")
        if own_folder:
            files.remove(location)
        folder = f" and its folder {location}" if own_folder else ""
        return [f"dropped the unfinished {target} of try {made_by}{folder}"]

    def written(self, spark: SparkSession, job: CtasJob) -> dict[str, Any]:
        """The making commit's version and metrics (``numOutputRows``, ``numOutputBytes``, ``numFiles``): read from
        its file in the table's log (``making_commit``), or from the table's history where that cannot say."""
        table = job.identifier
        location = (catalog.details(spark, table) or {}).get("Location")
        commit = making_commit(location, job.owner, catalog.properties(spark, table) or {})
        if commit is None:
            history = spark.sql(f"DESCRIBE HISTORY {table.quoted()} LIMIT {_HISTORY_LOOKBACK}").collect()
            entry = next((entry for entry in history if entry["operation"] in _MAKING_OPERATIONS), None)
            commit = (entry["version"], entry["operationMetrics"] or {}) if entry is not None else (None, {})
        made_version, metrics = commit
        return {
            "location": location,
            "format": DELTA.name,
            "rows": _count(metrics, "numOutputRows"),
            "bytes": _count(metrics, "numOutputBytes"),
            "files": _count(metrics, "numFiles"),
            "committed_version": made_version,
        }

    def sink_table(
        self, spark: SparkSession, name: str, frame: DataFrame, checkpoint: str, *, writes: str
    ) -> DeltaSinkTable:
        return delta_sink_table(spark, name, frame, checkpoint)

    def stream(self, spark: SparkSession, name: str) -> StreamedTable:
        return delta_stream(spark, name)

    def version(self, spark: SparkSession, table: TableIdentifier) -> TableVersion | None:
        """Its newest commit's number and id, from its log's names and that commit's file (a listing and a small
        read: Delta's ``DESCRIBE HISTORY`` takes a second in a new driver)."""
        location = (catalog.details(spark, table) or {}).get("Location")
        return delta_log.table_version(location) if location else None

    def read(self, spark: SparkSession, table: TableIdentifier, version: TableVersion | None) -> DataFrame:
        """Delta's time travel to ``version``'s number: the rows of that commit, whatever commits came after."""
        if version is None:
            return spark.table(table.quoted())
        return spark.sql(f"SELECT * FROM {table.quoted()} VERSION AS OF {version.number}")


def making_commit(location: str | None, owner: TableOwner, marks: dict[str, str]) -> tuple[int, dict[str, str]] | None:
    """The version and metrics of the commit that made the table for ``owner``'s task, from its one file in the
    table's log (``delta_log``). The version is the first, or the one after the version a replace replaced (the
    marks say which). None when the file is not there or is not that commit (another writer's came first, or commit
    info is off): the history says then."""
    if location is None or not owner.made(marks):
        return None
    made_version = int(marks[REPLACED_VERSION]) + 1 if REPLACED_VERSION in marks else 0
    made = delta_log.commit(location, made_version)
    if made is None or made.operation not in _MAKING_OPERATIONS:
        return None
    made_with = json.loads((made.info.get("operationParameters") or {}).get("properties") or "{}")
    if not owner.made(made_with) or owner_try(made_with) != owner_try(marks):
        return None
    return made_version, made.metrics


def check_loaded(spark: SparkSession) -> None:
    """Fail in one line, before any write, when the session did not load Delta Lake."""
    if spark.conf.get("spark.sql.catalog.spark_catalog", None) != DELTA.session_catalog:
        raise JobError(
            f"table format {DELTA.name} is not loaded in this Spark session: add {DELTA.name} to the catalog "
            f"connection's extra \"table-formats\", which gives Spark {', '.join(DELTA.coordinates)} and Delta's "
            "session catalog (docs/table-formats.md)"
        )


def _count(metrics: dict[str, str], name: str) -> int | None:
    value = metrics.get(name)
    return int(value) if value is not None else None


DELTA_TABLES = DeltaTables()
