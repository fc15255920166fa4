"""Runs a templated list of Spark SQL statements as one spark-submit job."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.errors import SpecError
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.streaming.sinks import PostgresUpsertSink, TableUpsertSink, declared_catalog_sinks
from spark_tables.hooks.plan import CompiledPlanHook
from spark_tables.operators.ctas_lifecycle import CtasLifecycleOperator
from spark_tables.operators.spark_job import SparkJobOperator
from spark_tables.tasks.sql_reader import join_statement_sets, read_statements, split_cached_views, split_script


class SparkSqlJobOperator(CtasLifecycleOperator):
    """Run Spark SQL statements in order in one Spark application, on the provider's catalog.

    XCom gets ``statements_run``, ``tables_written``, ``row_counts`` (rows in each written table afterwards,
    unless ``count_rows=False``) and, when the last statement is a query, its ``columns`` and first
    ``max_result_rows`` ``rows``.
    Only the last statement's query is executed; commands (CREATE, INSERT, ...) run where they stand.

    A ``CREATE TABLE ... AS SELECT`` statement gets ``SparkCtasOperator``'s lifecycle: its table is created
    marked as this try's and dropped with its files if the job fails or the task is stopped, never a table that
    existed before; it is marked complete once every statement has run. XCom's ``ctas`` says what each did.

    :param sql: a list of statements, or one string (or ``.sql`` file) split on the ``;`` outside strings and
        comments (``tasks.sql_reader``). (templated) A statement
        ``CREATE TEMPORARY VIEW name CACHED AS query`` declares a cached table (as ``caches`` does) instead of
        running: the first task of the DAG run that declares it computes and writes it, later ones read it.
    :param max_result_rows: how many rows of the last query come back in XCom.
    :param count_rows: count each written table's rows afterwards for XCom's ``row_counts``: one Spark job a table,
        the footers of a parquet table, a full scan of a CSV or JSON one. ``False`` skips it.

    Plan statements (``COMPILE [AND EXECUTE] PLAN``, ``EXECUTE PLAN``, ``EXPLAIN PLAN``) run as the plan operators
    run them; XCom's ``plans`` says what each did.

    :param plan_configuration: the plan statements' job-level options (``table.exec.state.ttl``, ...). (templated)
    :param postgres_sinks: ``PostgresUpsertSink`` declarations a compiled ``INSERT INTO`` may name, and the only
        PostgreSQL sinks an executed plan may write.
    :param catalog_sinks: the catalog tables an executed plan may write: names of tables it appends to,
        ``TableUpsertSink`` declarations of tables it keeps by key.
    :param checkpoints: root of executed plans' checkpoints; default ``[spark_tables] checkpoint_uri``. (templated)
    """

    template_fields: Sequence[str] = (
        *SparkJobOperator.template_fields,
        "sql",
        "plan_configuration",
        "checkpoints",
    )
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {**SparkJobOperator.template_fields_renderers, "sql": "sql"}

    def __init__(
        self,
        *,
        sql: str | list[str],
        max_result_rows: int = 100,
        count_rows: bool = True,
        plan_configuration: dict[str, Any] | None = None,
        postgres_sinks: Sequence[PostgresUpsertSink] = (),
        catalog_sinks: Sequence[str | TableUpsertSink] = (),
        checkpoints: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.catalog_sinks = declared_catalog_sinks(catalog_sinks)
        self.sql = sql
        self.max_result_rows = max_result_rows
        self.count_rows = count_rows
        self.plan_configuration = plan_configuration
        self.postgres_sinks = tuple(postgres_sinks)
        self.checkpoints = checkpoints

    def build_job(self, context: Context) -> SqlJob:
        statements = read_statements(split_cached_views(self._statements())[0])
        plan_statements = [statement.plan for statement in statements if statement.plan is not None]
        plans = (
            CompiledPlanHook().plan_options(
                plan_statements,
                self.plan_configuration,
                self.postgres_sinks,
                self.checkpoints,
                catalog_sinks=self.catalog_sinks,
            )
            if plan_statements
            else None
        )
        job = SqlJob(
            statements=statements,
            max_result_rows=self.max_result_rows,
            owner=self.table_owner(context),
            plans=plans,
            count_rows=self.count_rows,
        )
        return dataclasses.replace(job, sweep=self.sweep(context)) if job.ctas else job

    def cached_tables(self, context: Context, job: Any) -> tuple[CachedTable, ...]:
        """The ``caches`` given, and those the SQL declares with ``CREATE TEMPORARY VIEW name CACHED AS``."""
        return (*super().cached_tables(context, job), *split_cached_views(self._statements())[1])

    def _statements(self) -> tuple[str, ...]:
        statements = split_script(self.sql) if isinstance(self.sql, str) else self.sql
        if not isinstance(statements, list | tuple):
            raise SpecError(f"sql must be a string or a list of strings, not {type(self.sql).__name__}")
        return tuple(join_statement_sets(statements))
