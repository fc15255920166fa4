"""CREATE TABLE ... AS SELECT with FLIP-218's lifecycle: created before the job, dropped if it fails or stops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.errors import SpecError
from spark_tables.operators.ctas_lifecycle import CtasLifecycleOperator
from spark_tables.operators.spark_job import SparkJobOperator
from spark_tables.tasks.sql_reader import nestable_query, read_ctas

_STATEMENT_FIELDS = ("table", "query", "producer", "partitioned_by", "properties", "location", "comment")


class SparkCtasOperator(CtasLifecycleOperator):
    """Create a table from a query's rows, or from a PySpark function's, and never leave a half-made table.

    Give ``sql`` (``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t [USING f] [PARTITIONED BY (...)] [LOCATION '...']
    [COMMENT '...'] [TBLPROPERTIES (...)] AS SELECT ...``) or the same as parameters: ``table`` with ``query`` or
    ``producer`` (``module:function`` of a SparkSession returning a DataFrame, shipped with ``py_files``).

    The table is created, with the schema the query produces, before the job fills it, and marked in its
    properties as this try's. If the job fails or the task is stopped, what this try created is dropped with its
    files, and only that: a table that existed before is never dropped. Every try first undoes what earlier
    tries of the task left, so retries are safe. XCom gets the table, rows, bytes, location and what was undone.

    :param format: the table's format (``USING``): a Spark file format, or ``delta`` (docs/table-formats.md);
        default: the catalog's default format (its connection's ``default-format``; parquet unless it says otherwise).
    :param atomicity: for Spark's file formats, ``table`` (the FLIP's: visible from creation, dropped on failure) or
        ``staging`` (the rows go to a staging table that takes the final name only when complete). REPLACE needs
        ``staging``; it is the default then. A Delta table is made or replaced in one commit (``commit``).
    :param if_not_exists: succeed without running the job when the table exists.
    :param replace: replace the table if it exists; the old one stays readable until the new one is complete.
    """

    template_fields: Sequence[str] = (*SparkJobOperator.template_fields, "sql", *_STATEMENT_FIELDS)
    #: None: Airflow would read any templated field ending in ".sql" as a file (a table named "x.sql", say).
    #: Keep a statement in a file with ``sql="{% include 'ctas/daily.sql' %}"``.
    template_ext: Sequence[str] = ()
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SparkJobOperator.template_fields_renderers,
        "sql": "sql",
        "query": "sql",
        "properties": "json",
    }
    ui_color = "#dcefe3"

    def __init__(
        self,
        *,
        sql: str | None = None,
        table: str | None = None,
        query: str | None = None,
        producer: str | None = None,
        format: str | None = None,
        partitioned_by: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        location: str | None = None,
        comment: str | None = None,
        if_not_exists: bool = False,
        replace: bool = False,
        atomicity: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sql = sql
        self.table = table
        self.query = query
        self.producer = producer
        self.format = format
        self.partitioned_by = partitioned_by
        self.properties = properties
        self.location = location
        self.comment = comment
        self.if_not_exists = if_not_exists
        self.replace = replace
        self.atomicity = atomicity

    def build_job(self, context: Context) -> CtasJob:
        given = {name: getattr(self, name) for name in _STATEMENT_FIELDS if getattr(self, name) is not None}
        if self.sql is not None:
            if given:
                raise SpecError(f"give sql or {sorted(given)}, not both: the statement already says them")
            given = read_ctas(self.sql).job_fields()
        elif "table" not in given:
            raise SpecError("nothing to create: give sql (CREATE TABLE ... AS SELECT ...) or table with query/producer")
        elif "query" in given:
            given["query"] = nestable_query(given["query"], "ctas job")
        flags = {"if_not_exists": self.if_not_exists, "replace": self.replace}
        for flag, value in flags.items():
            given[flag] = given.get(flag, False) or value
        if self.format is not None:
            given["format"] = self.format
        if self.atomicity is not None:
            given["atomicity"] = self.atomicity
        return CtasJob(**given, owner=self.table_owner(context), sweep=self.sweep(context))
