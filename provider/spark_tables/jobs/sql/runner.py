"""The ``sql`` job: run statements in order, report the tables they wrote and the last query's rows.

A ``CREATE TABLE ... AS SELECT`` runs as a CTAS does (``jobs.ctas.lifecycle.CtasTable``): its table is created
marked as this try's, kept and marked complete only once every statement has run, and dropped with its files
if the job fails or is stopped. Before the first statement, the job undoes what earlier tries of the task left
unfinished of those tables, and what lost tries of other tasks left (``sweep``).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import logging
from collections.abc import Iterable
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.result import CtasTableReport
from spark_tables.core.errors import JobError, one_line
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.sql.result import SqlResult
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.ctas.lifecycle import CtasFailed, CtasTable, sweep, undo_unfinished, undone_note

log = logging.getLogger(__name__)


#: What to do about a Spark error condition (its class, before any ``.``) a statement may meet, where Spark's own
#: words do not say it.
STATEMENT_HINTS: dict[str, str] = {
    "INSERT_COLUMN_ARITY_MISMATCH": (
        "the query's columns are not the table's: if the table was there before with other columns (a CREATE TABLE "
        "IF NOT EXISTS then keeps them), drop it or write to a table of another name"
    ),
    "INCOMPATIBLE_DATA_FOR_TABLE": (
        "the query's columns do not fit the table's types: cast them, or, if the table was there before with other "
        "columns, drop it or write to a table of another name"
    ),
}


class StatementFailed(JobError):
    """A statement failed; the message names which one, Spark's explanation, and what to do where it is known."""

    @classmethod
    def of(cls, number: int, total: int, err: BaseException) -> StatementFailed:
        condition = (err.getCondition() or "") if isinstance(err, PySparkException) else ""
        hint = STATEMENT_HINTS.get(condition.partition(".")[0])
        return cls(f"statement {number}/{total} failed: {one_line(err)}" + (f" ({hint})" if hint else ""))


def run_sql(spark: SparkSession, job: SqlJob, cancellation: Cancellation) -> SqlResult:
    result: dict[str, Any] = {"swept": sweep(spark, job.sweep)}
    made: list[CtasTable] = []
    try:
        result["undone_before"] = _undo_unfinished(spark, job.ctas.values())
        output = _run_statements(spark, job, cancellation, made)
        for table in made:
            if table.created:
                table.complete()
    except Exception as err:
        undone = _undo_unfinished(spark, [table.job for table in made])
        note = undone_note(undone) if any(table.created for table in made) else ""
        raise CtasFailed(one_line(err) + note, output=SqlResult(**result, undone=undone, cleaned_up=True)) from err
    return SqlResult(**result, **output)


def _run_statements(
    spark: SparkSession, job: SqlJob, cancellation: Cancellation, made: list[CtasTable]
) -> dict[str, Any]:
    """Run the statements in order; the table of each CTAS statement goes to ``made`` as the statement starts."""
    reports: list[dict[str, Any]] = []  # what each CTAS statement did
    plans: list[PlanResult] = []  # what each plan statement did
    tables_written: list[str] = []
    frame = table = None
    total = len(job.statements)
    for number, statement in enumerate(job.statements, start=1):
        cancellation.check()
        log.info("statement %d/%d: %s", number, total, statement.summary)
        ctas = job.ctas.get(number)
        try:
            if statement.plan is not None:
                frame = None
                from spark_tables.jobs.plan.runner import run_plan_statement  # a plan's modules: only when needed

                outcome = run_plan_statement(spark, statement.plan, job.plans or PlanOptions(), cancellation)
                plans.append(dataclasses.replace(outcome, statement=number))
            elif ctas is None:
                frame = spark.sql(statement.text)  # commands run here; a query runs only if it is the last statement
            else:
                frame = None
                made.append(CtasTable(spark, ctas))
                outcome = made[-1].make(cancellation, complete=False)
                reports.append(
                    {"statement": number, "table": ctas.table, "atomicity": made[-1].job.atomicity, **outcome}
                )
        except Exception as err:
            raise StatementFailed.of(number, total, err) from err
        table = statement.writes
        if table is not None and table not in tables_written:
            tables_written.append(table)
    try:
        last_rows = _last_rows(frame if table is None else None, job.max_result_rows)  # a query's, not a command's
    except Exception as err:  # the last statement's query runs here
        raise StatementFailed.of(total, total, err) from err
    return {
        "statements_run": total,
        "tables_written": tables_written,
        "row_counts": _row_counts(spark, tables_written) if job.count_rows else None,
        "ctas": [_ctas_report(spark, report, ctas_table) for report, ctas_table in zip(reports, made, strict=True)],
        **({"plans": plans} if plans else {}),
        **last_rows,
    }


def _row_counts(spark: SparkSession, tables: list[str]) -> dict[str, int]:
    """The rows in each table afterwards; a table the job wrote and dropped again (a scratch table) has none."""
    return {name: spark.table(name).count() for name in tables if spark.catalog.tableExists(name)}


def _ctas_report(spark: SparkSession, report: dict[str, Any], table: CtasTable) -> CtasTableReport:
    """What a CTAS statement did, with where its table is and what it holds, unless it was skipped or a later
    statement dropped it (a scratch table)."""
    if "skipped" in report:
        return CtasTableReport(**report)
    if not spark.catalog.tableExists(table.job.table):
        return CtasTableReport(**report, dropped_later=True)
    return CtasTableReport(**report, **table.finished())


def _undo_unfinished(spark: SparkSession, jobs: Iterable[CtasJob]) -> list[str]:
    """Undo what this try, and earlier tries of its task, left unfinished of the tables of these CTAS statements."""
    return [line for ctas in jobs for line in undo_unfinished(spark, ctas.identifier, ctas.owner)]


def _last_rows(frame: DataFrame | None, max_rows: int) -> dict[str, Any]:
    """The columns and first ``max_rows`` rows of the last statement's query, JSON-ready."""
    if frame is None or not frame.columns:
        return {"columns": [], "rows": [], "rows_truncated": False}
    rows = frame.limit(max_rows + 1).collect()
    return {
        "columns": frame.columns,
        "rows": [[_json_value(value) for value in row] for row in rows[:max_rows]],
        "rows_truncated": len(rows) > max_rows,
    }


def _json_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return {k: _json_value(v) for k, v in value.asDict().items()}
    return value
