"""Runs a job that would take hours through SparkJobHook, printing ``STARTED <pgid>`` once its statement runs.

``python long_job.py <folder>``: the process a test kills to play an Airflow task that dies outright.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.spark_job import SparkJobHook

#: Far more rows than are counted in a test's lifetime, each made by a millisecond's sleep (as the CTAS scenarios'
#: endless query): the job waits, leaving the CPU to the tests beside it.
LONG_QUERY = (
    "SELECT count(slept) FROM (SELECT reflect('java.lang.Thread', 'sleep', CAST(1 AS BIGINT)) AS slept"
    " FROM range(0, 1000000000000, 1, 2))"
)


def long_job_hook(folder: str, on_started: Any) -> SparkJobHook:
    """A hook for ``LONG_QUERY`` that calls ``on_started(hook)`` when the driver logs that the statement runs."""
    hook = SparkJobHook(
        spec=JobSpec(job=SqlJob(statements=(LONG_QUERY,)), result_uri=f"file://{folder}/result.json"),
        catalog=EmbeddedCatalog(home=f"{folder}/catalog"),
        name="spark-tables-long-job",
    )
    watch_log = hook.watch_log

    def watching(itr: Iterator[Any]) -> Iterator[Any]:
        for line in watch_log(itr):
            if "statement 1/1" in line:
                on_started(hook)
            yield line

    hook.watch_log = watching  # type: ignore[method-assign]
    return hook


def run_in_thread(hook: Any) -> tuple[threading.Thread, list[BaseException]]:
    """Start ``hook.run()`` in a thread of its own, as a task's job; what it raises goes into the list."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            hook.run()
        except BaseException as err:
            failures.append(err)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    return runner, failures


if __name__ == "__main__":
    job = long_job_hook(sys.argv[1], lambda hook: print(f"STARTED {hook.submit_process.pid}", flush=True))
    job.run()
