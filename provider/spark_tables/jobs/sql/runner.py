"""The ``sql`` job: run statements in order, report the tables they wrote and the last query's rows."""

from __future__ import annotations

import datetime
import decimal
import logging
from typing import Any

from pyspark.sql import SparkSession

from spark_tables.core.errors import JobError, one_line
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.statements import summary, written_table
from spark_tables.jobs.cancellation import Cancellation

log = logging.getLogger(__name__)


class StatementFailed(JobError):
    """A statement failed; the message names which one and Spark's own first line."""


def run_sql(spark: SparkSession, job: SqlJob, cancellation: Cancellation) -> dict[str, Any]:
    tables_written: list[str] = []
    frame = table = None
    total = len(job.statements)
    for number, statement in enumerate(job.statements, start=1):
        cancellation.check()
        log.info("statement %d/%d: %s", number, total, summary(statement))
        try:
            frame = spark.sql(statement)  # commands run here; a query runs only if it is the last statement
        except Exception as err:
            raise StatementFailed(f"statement {number}/{total} failed: {one_line(err)}") from err
        table = written_table(statement)
        if table is not None and str(table) not in tables_written:
            tables_written.append(str(table))

    output: dict[str, Any] = {
        "statements_run": total,
        "tables_written": tables_written,
        "row_counts": {table: spark.table(table).count() for table in tables_written},
        "columns": [],
        "rows": [],
        "rows_truncated": False,
    }
    if frame is not None and table is None and frame.columns:  # the last statement read rows, wrote none
        rows = frame.limit(job.max_result_rows + 1).collect()
        output["columns"] = frame.columns
        output["rows"] = [[_json_value(value) for value in row] for row in rows[: job.max_result_rows]]
        output["rows_truncated"] = len(rows) > job.max_result_rows
    return output


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
