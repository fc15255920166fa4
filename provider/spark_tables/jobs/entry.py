"""The bundled Spark driver: ``spark-submit entry.py '<job spec JSON>'``.

Reads the spec, starts the session, runs the job and writes a JSON result for the Airflow side, also when
the job fails, so that the task fails with the job's own one-line error.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from spark_tables.core.errors import one_line
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import Job, JobSpec
from spark_tables.jobs.result_file import write_result
from spark_tables.jobs.sql import run_sql
from spark_tables.jobs.watchdog import watch_parent

log = logging.getLogger("spark_tables")

#: The function that runs each job kind, given the session and the validated job.
JOB_RUNNERS: dict[str, Callable[[SparkSession, Any], dict[str, Any]]] = {"sql": run_sql}


def run_job(spark: SparkSession, job: Job) -> JobResult:
    """Run one job on a session and describe how it went; a failure becomes the result's one-line error."""
    common: dict[str, Any] = {
        "kind": job.kind,
        "application_id": spark.sparkContext.applicationId,
        "spark_version": spark.version,
    }
    log.info("%s job started in application %s", job.kind, common["application_id"])
    started = time.monotonic()
    try:
        output = JOB_RUNNERS[job.kind](spark, job)
    except Exception as err:
        log.exception("%s job failed", job.kind)
        return JobResult(error=one_line(err), **common)
    return JobResult(output=output, work_seconds=round(time.monotonic() - started, 3), **common)


def main(argv: list[str]) -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="spark_tables %(levelname)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    if len(argv) != 2:
        log.error("usage: entry.py '<job spec JSON>'")
        return 2
    spec = JobSpec.from_json(argv[1])
    if spec.watch_pid:
        watch_parent(spec.watch_pid)
    started = time.monotonic()
    spark = SparkSession.builder.getOrCreate()
    session_seconds = round(time.monotonic() - started, 3)
    result = run_job(spark, spec.job)
    write_result(spec.result_uri, dataclasses.replace(result, session_seconds=session_seconds).to_json())
    spark.stop()
    return 0 if result.succeeded else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
