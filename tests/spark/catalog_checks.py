"""What the spark-layer tests of CTAS tables share: the task try that owns them, a job run as the driver runs it,
and what the catalog holds and what lies on disk."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from pyspark import StatusTracker
from pyspark.sql import SparkSession

from spark_tables.core.ctas.ownership import PREFIX, TableOwner
from spark_tables.core.job_kind import Job
from spark_tables.core.job_result import JobResult
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.entry import run_job

FAILING_QUERY = "SELECT assert_true(id < 3) AS ok FROM range(10)"  # ANSI: fails at run time, after creation
#: An endless query, for the tests that stop a job, of many short tasks: a stopped job's running tasks end when they
#: next look whether they were killed, which a task of range() does between batches only. Of two tasks a billion
#: rows each, they wrote on, minutes after the stop, holding both cores of the session the next tests share.
SLOW_QUERY = "SELECT id, sha2(CAST(id AS STRING), 256) AS h FROM range(0, 2000000000, 1, 2000)"


def owner(try_number: int = 1, run_id: str = "scheduled__2026-11-20", task_id: str = "make_table") -> TableOwner:
    return TableOwner(dag_id="tables", run_id=run_id, task_id=task_id, map_index=-1, try_number=try_number)


def run(spark: SparkSession, job: Job, cancellation: Cancellation | None = None) -> JobResult:
    result = run_job(spark, job, cancellation)
    json.dumps(result.output_fields())  # the output goes to XCom: it must be JSON as it is
    return result


def local(location: str) -> str:
    """A ``file:`` location from the catalog as a local path."""
    assert location.startswith("file:"), location
    return "/" + location[len("file:") :].lstrip("/")


def db_folder(spark: SparkSession, db: str) -> str:
    rows = spark.sql(f"DESCRIBE DATABASE {db}").collect()
    return local({row[0]: row[1] for row in rows}["Location"])


def table_location(spark: SparkSession, table: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    return local({row[0]: row[1] for row in rows}["Location"])


def details(spark: SparkSession, table: str) -> dict[str, str]:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    return {row[0]: row[1] for row in rows if row[0] and not row[0].startswith("#")}


def tables(spark: SparkSession, db: str) -> list[str]:
    """The tables of ``db``: not the session's temporary views, which the catalog lists with every database's."""
    return sorted(t.name for t in spark.catalog.listTables(db) if not t.isTemporary)


def props(spark: SparkSession, table: str) -> dict[str, str]:
    return {row[0]: row[1] for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def marks(spark: SparkSession, table: str) -> dict[str, str]:
    return {k: v for k, v in props(spark, table).items() if k.startswith(PREFIX)}


def rows(spark: SparkSession, table_or_query: str) -> list[tuple[Any, ...]]:
    frame = spark.sql(table_or_query) if " " in table_or_query.strip() else spark.table(table_or_query)
    return sorted(tuple(row) for row in frame.collect())


def files(folder: str) -> dict[str, int]:
    """Every file under a folder, by relative path, with its modification time in ns."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            found[os.path.relpath(path, folder)] = os.stat(path).st_mtime_ns
    return found


def data_files(folder: str) -> list[str]:
    return sorted(p for p in files(folder) if os.path.basename(p).startswith("part-"))


def sql_properties(values: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in values.items())


def plain_table(spark: SparkSession, table: str, query: str, properties: dict[str, str] | None = None) -> None:
    """A table made by plain SQL, as a user (or a killed try, given its marks) would leave it."""
    clause = f" TBLPROPERTIES ({sql_properties(properties)})" if properties else ""
    spark.sql(f"CREATE TABLE {table} USING parquet{clause} AS {query}")


def no_task_running(tracker: StatusTracker) -> bool:
    """No task runs in the session's executors: a stopped job's stages end at once, its running tasks later."""
    return not tracker.getActiveStageIds() and sum(e.numRunningTasks for e in tracker.getExecutorInfos()) == 0


def wait_until(condition: Callable[[], bool], seconds: float, stop: threading.Event | None = None) -> bool:
    """Poll ``condition`` every 50 ms, for at most ``seconds``; False if it never held (or ``stop`` was set)."""
    stop = stop or threading.Event()
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline or stop.wait(0.05):
            return False
    return True
