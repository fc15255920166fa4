"""A ``ctas`` job: create a table from a query's (or a PySpark function's) rows, owned by one task try."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import ClassVar

from spark_tables.core.ctas.ownership import PREFIX, TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import PLAIN_NAME, TableIdentifier
from spark_tables.core.row_source import checked_row_source
from spark_tables.core.table_format.formats import FILE_FORMATS, TABLE_FORMATS

#: Atomicity levels of Spark's file formats: ``table`` (FLIP-218's: the table is visible from creation and dropped if
#: the job fails) and ``staging`` (the rows go to a staging table that takes the final name only when complete).
ATOMICITY_LEVELS = ("table", "staging")
#: The atomicity of a table format with a log of commits: the table, or its new version, is one commit.
COMMIT = "commit"
FORMATS = (*FILE_FORMATS, *TABLE_FORMATS)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class CtasCleanupJob:
    """Drop what the tries of one task left unfinished of its CTAS tables, from outside a try that died before
    cleaning up.

    Only tables carrying this task's marks are touched: an unfinished table under a final name, its staging
    table, and a replaced table moved aside by a swap that did not finish (which is moved back).
    """

    kind: ClassVar[str] = "ctas_cleanup"
    tables: tuple[str, ...]
    owner: TableOwner

    def __post_init__(self) -> None:
        if isinstance(self.tables, str) or not isinstance(self.tables, list | tuple) or not self.tables:
            raise SpecError("ctas cleanup job: tables must be a non-empty list of table names")
        for table in self.tables:
            TableIdentifier.parse(table)
        object.__setattr__(self, "tables", tuple(self.tables))
        object.__setattr__(self, "owner", TableOwner.from_dict(self.owner))

    @property
    def identifiers(self) -> tuple[TableIdentifier, ...]:
        return tuple(TableIdentifier.parse(table) for table in self.tables)


def sweep_entries(entries: object, job: str) -> tuple[CtasCleanupJob, ...]:
    """A job's ``sweep`` (what lost tries of other tasks left, undone before its own work) as cleanup jobs."""
    if isinstance(entries, str) or not isinstance(entries, list | tuple):
        raise SpecError(f"{job}: sweep must be a list of {{tables, owner}} objects")
    return tuple(_cleanup(entry, job) for entry in entries)


def _cleanup(entry: object, job: str) -> CtasCleanupJob:
    if isinstance(entry, CtasCleanupJob):
        return entry
    if not isinstance(entry, dict) or set(entry) != {"tables", "owner"}:
        raise SpecError(f"{job}: each sweep entry must be an object with exactly tables and owner")
    return CtasCleanupJob(**entry)


@dataclass(frozen=True)
class CtasJob:
    """``CREATE TABLE table AS query``, or ``REPLACE TABLE`` with ``replace``; rows from ``query`` or ``producer``.

    ``producer`` is ``module:function``, a function of a SparkSession returning the DataFrame of rows, in a
    module the driver imports (ship it with ``py_files``).
    """

    kind: ClassVar[str] = "ctas"
    table: str
    owner: TableOwner
    query: str | None = None
    producer: str | None = None
    #: None: the catalog's default format (its session's ``spark.sql.sources.default``), which the job resolves
    #: (``with_format``) before anything is made.
    format: str | None = None
    partitioned_by: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    location: str | None = None
    comment: str | None = None
    if_not_exists: bool = False
    replace: bool = False
    atomicity: str | None = None
    #: What lost tries of other tasks left (their claims), undone before this job's own work.
    sweep: tuple[CtasCleanupJob, ...] = ()

    def __post_init__(self) -> None:
        TableIdentifier.parse(self.table)
        object.__setattr__(self, "owner", TableOwner.from_dict(self.owner))
        object.__setattr__(self, "sweep", sweep_entries(self.sweep, "ctas job"))
        object.__setattr__(self, "query", checked_row_source(self.query, self.producer, "ctas job"))
        if self.format is not None:
            if not isinstance(self.format, str) or self.format.lower() not in FORMATS:
                raise SpecError(f"ctas job: format {self.format!r} is not supported: use one of {', '.join(FORMATS)}")
            object.__setattr__(self, "format", self.format.lower())
        self._check_partitioning()
        self._check_properties()
        self._check_location()
        if self.comment is not None and not isinstance(self.comment, str):
            raise SpecError("ctas job: comment must be a string")
        for flag in ("if_not_exists", "replace"):
            if not isinstance(getattr(self, flag), bool):
                raise SpecError(f"ctas job: {flag} must be true or false")
        if self.if_not_exists and self.replace:
            raise SpecError("ctas job: IF NOT EXISTS and REPLACE contradict each other: use one")
        self._check_atomicity()

    def _check_partitioning(self) -> None:
        columns = self.partitioned_by
        if isinstance(columns, str) or not isinstance(columns, list | tuple):
            raise SpecError("ctas job: partitioned_by must be a list of column names")
        for column in columns:
            if not isinstance(column, str) or not PLAIN_NAME.fullmatch(column):
                raise SpecError(f"ctas job: partition column {column!r} is invalid: use letters, digits, underscores")
        if len({c.lower() for c in columns}) != len(columns):
            raise SpecError(f"ctas job: partition columns {list(columns)} repeat a column: name each once")
        object.__setattr__(self, "partitioned_by", tuple(columns))

    def _check_location(self) -> None:
        if self.location is None:
            return
        if not isinstance(self.location, str) or not self.location.strip():
            raise SpecError("ctas job: location must be a non-empty path or URI, or None for a managed table")
        if not (self.location.startswith("/") or _URI.match(self.location)):
            raise SpecError(
                f"ctas job: location {self.location!r} is relative, and Spark and the provider would resolve it "
                "differently: give an absolute path or a URI (file:/..., s3a://..., hdfs://...)"
            )
        if ".." in self.location.split("/"):
            raise SpecError(f"ctas job: location {self.location!r} has a '..' part: give the folder's own path")

    def _check_properties(self) -> None:
        if not isinstance(self.properties, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.properties.items()
        ):
            raise SpecError("ctas job: properties must map strings to strings")
        reserved = sorted(k for k in self.properties if k.lower().startswith(PREFIX))
        if reserved:
            raise SpecError(f"ctas job: table properties {reserved} are reserved for ownership marks: rename them")

    def _check_atomicity(self) -> None:
        if self.format is None:  # the default atomicity once the format is known (``with_format``)
            if self.atomicity is not None and self.atomicity not in (*ATOMICITY_LEVELS, COMMIT):
                raise SpecError(f"ctas job: atomicity {self.atomicity!r} is invalid: use 'table' or 'staging'")
            self._check_replace_atomicity()
            return
        if self.format in TABLE_FORMATS:
            if self.atomicity not in (None, COMMIT):
                raise SpecError(
                    f"ctas job: a {self.format} table is made or replaced in one commit: leave atomicity out, or give "
                    f"'{COMMIT}' ('{self.atomicity}' is for Spark's file formats)"
                )
            object.__setattr__(self, "atomicity", COMMIT)
            return
        if self.atomicity is None:
            object.__setattr__(self, "atomicity", "staging" if self.replace else "table")
        if self.atomicity not in ATOMICITY_LEVELS:
            raise SpecError(f"ctas job: atomicity {self.atomicity!r} is invalid: use 'table' or 'staging'")
        self._check_replace_atomicity()

    def _check_replace_atomicity(self) -> None:
        if self.replace and self.atomicity == "table":
            raise SpecError(
                "ctas job: REPLACE TABLE needs atomicity='staging', which keeps the old table until the new one is "
                "complete; atomicity='table' would drop it first"
            )

    def with_format(self, default_format: str) -> CtasJob:
        """The job with its format, the catalog's default when it names none; checked again (atomicity)."""
        if self.format is not None:
            return self
        try:
            return dataclasses.replace(self, format=default_format)
        except SpecError as err:
            raise SpecError(f"{err} (the catalog's default format is {default_format})") from None

    @property
    def identifier(self) -> TableIdentifier:
        return TableIdentifier.parse(self.table)

    @property
    def owned_tables(self) -> tuple[str, ...]:
        """The tables the job may create, marked as its owner's: what the task's claim names."""
        return (self.table,)

    @property
    def table_formats(self) -> tuple[str, ...]:
        """The table format its table is made in, which the catalog must load; none for Spark's file formats."""
        return (self.format,) if self.format in TABLE_FORMATS else ()

    def describe(self) -> str:
        verb = "CREATE TABLE IF NOT EXISTS" if self.if_not_exists else "CREATE TABLE"
        verb = "REPLACE TABLE" if self.replace else verb
        source = "a query" if self.query is not None else f"rows from {self.producer}"
        made_as = self.format or "the catalog's default format"
        return f"{verb} {self.table} AS {source} ({made_as}, atomicity {self.atomicity or 'by format'})"
