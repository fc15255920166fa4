"""The bundled Spark driver: ``spark-submit entry.py '<job spec JSON>'``, or ``@<URI>`` of a spec in a file (a long
spec, or one that holds a password: the driver sets the spec's ``session_conf`` on its session, never logging it).

Reads the spec, starts the session, runs the job and writes a JSON result for the Airflow side, also when
the job fails, so that the task fails with the job's own one-line error.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from spark_tables.core.errors import JobError, SpecError, one_line
from spark_tables.core.exchange import cancel_uri, started_uri
from spark_tables.core.job_kind import Job
from spark_tables.core.job_output import JobOutput
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse, JobSpec
from spark_tables.core.kinds import KINDS
from spark_tables.core.object_storage import executor_environment
from spark_tables.jobs import files
from spark_tables.jobs.cache.views import prepare_cached_views
from spark_tables.jobs.cancellation import Cancellation, watch
from spark_tables.jobs.session_facts import application_id
from spark_tables.jobs.shared_folders import check_shared_folders

log = logging.getLogger("spark_tables")


def runner(kind: str) -> Callable[[SparkSession, Any, Cancellation], JobOutput]:
    """The runner of job kind ``kind`` (``core.kinds``), its module imported now: the driver imports only its own
    job's, since the others' modules cost a driver's start up to a second (a plan's sqlglot, pyarrow and psycopg,
    before its session starts)."""
    module, _, function = KINDS[kind].runner.partition(":")
    return getattr(importlib.import_module(module), function)


#: Where a Hive catalog's session keeps the resources it downloads: a folder it makes in the temporary folder and never
#: removes (``<session id>_resources``). The driver gives it one of its own, removed when the driver ends.
HIVE_RESOURCES_DIR = "spark.hadoop.hive.downloaded.resources.dir"


def run_job(
    spark: SparkSession,
    job: Job,
    cancellation: Cancellation | None = None,
    caches: tuple[CacheUse, ...] = (),
    shared_folders: Mapping[str, str] | None = None,
) -> JobResult:
    """Check that the executors share ``shared_folders`` with the driver (on a cluster), make the cached tables
    views, then run one job on a session and describe how it went.

    A failure becomes the result's one-line error.
    """
    common: dict[str, Any] = {
        "kind": job.kind,
        "application_id": application_id(spark),
        "spark_version": spark.version,
    }
    log.info("%s job started in application %s", job.kind, common["application_id"])
    cancellation = cancellation or Cancellation()
    started, cache_reports = time.monotonic(), {}
    try:
        cancellation.check()
        check_shared_folders(spark, shared_folders or {})
        prepare_cached_views(spark, caches, cancellation, cache_reports)
        output = runner(job.kind)(spark, job, cancellation)
    except Exception as err:
        error = one_line(err)
        if expected(err, error):
            log.error("%s job failed: %s", job.kind, error)
        else:
            log.exception("%s job failed", job.kind)
        if cancellation.requested and not error.startswith("cancelled"):
            error = f"cancelled: {cancellation.reason} ({error})"
        return JobResult(error=error, output=getattr(err, "output", None), caches=cache_reports, **common)
    return JobResult(output=output, caches=cache_reports, work_seconds=round(time.monotonic() - started, 3), **common)


def expected(error: Exception, line: str) -> bool:
    """Whether a job's failure is one its line says all of: the provider's own (bad input, a failure it names) and
    Spark's, whose error classes name their cause (``[TABLE_OR_VIEW_NOT_FOUND] ...``, also inside a Java exception);
    for any other the driver's log gets its traceback, which whoever looks into it needs."""
    return isinstance(error, SpecError | JobError | PySparkException) or line.startswith("[")


def session_builder(session_conf: dict[str, str]) -> SparkSession.Builder:
    """The builder of the job's session, with the spec's session conf: the secrets spark-submit was not given.

    Set before the SparkContext starts, so ``spark.hadoop.*`` reaches the Hive client's Hadoop configuration;
    Spark's ``spark.redaction.regex`` keeps their values out of its UI, event log and ``SET`` output. The storage
    credentials of the driver's environment go on to its executors (``core/object_storage.py``).
    """
    builder = SparkSession.builder
    for key, value in {**executor_environment(os.environ), **session_conf}.items():
        builder = builder.config(key, value)
    return builder


def announce_start(result_uri: str, application_id: str) -> None:
    """Say, beside the result, that the session started and in which application: a later try of the task, which
    did not start this driver, asks the cluster manager about that application."""
    note = {"application_id": application_id, "host": socket.gethostname(), "pid": os.getpid()}
    files.write_text(started_uri(result_uri), json.dumps(note))


def main(argv: list[str]) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="spark_tables %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)  # a second, 20 kB copy of each SQL error
    if len(argv) != 2:
        log.error("usage: entry.py '<job spec JSON>' | @<job spec URI>")
        return 2
    spec = JobSpec.from_json(files.read_text(argv[1][1:]) if argv[1].startswith("@") else argv[1])
    cancellation = Cancellation()
    watch(cancellation, parent_pid=spec.watch_pid, marker_uri=cancel_uri(spec.result_uri))
    with tempfile.TemporaryDirectory(prefix="spark_tables_driver_") as scratch:
        started = time.monotonic()
        spark = session_builder({**spec.session_conf, HIVE_RESOURCES_DIR: scratch}).getOrCreate()
        cancellation.interrupt_with(spark.interruptAll)
        session_seconds = round(time.monotonic() - started, 3)
        if spec.durable:
            announce_start(spec.result_uri, application_id(spark))
        result = run_job(spark, spec.job, cancellation, spec.caches, spec.shared_folders)
        files.write_text(spec.result_uri, dataclasses.replace(result, session_seconds=session_seconds).to_json())
        if spec.durable:  # the task that takes the result over may be another try's: its log shows this was done
            log.info("result written; stopping the Spark session")
        spark.stop()
    return 0 if result.succeeded else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
