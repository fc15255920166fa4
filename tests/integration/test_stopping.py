"""Stopping a task stops its Spark application: the spark-submit JVM and the Python driver it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from spark_tables.hooks.driver_processes import CANCEL_GRACE_SECONDS, STOP_GRACE_SECONDS
from spark_tables.hooks.spark_job import SparkJobFailed
from spark_tables.jobs.cancellation import DEFAULT_DEADLINE_SECONDS
from tests.integration.long_job import long_job_hook, run_in_thread

pytestmark = pytest.mark.integration


def _process_group(pgid: int) -> list[psutil.Process]:
    members = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid:
                members.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def _is_python_driver(process: psutil.Process) -> bool:
    try:
        return any(part.endswith("entry.py") for part in process.cmdline()) and "python" in process.name()
    except psutil.NoSuchProcess:
        return False


def test_on_kill_stops_spark_submit_and_the_python_driver(spark_env: Path) -> None:
    started = threading.Event()
    hook = long_job_hook(str(spark_env), lambda _hook: started.set())
    runner, failures = run_in_thread(hook)
    try:
        assert started.wait(timeout=180), "the job never started its statement"
        group = _process_group(hook.submit_process.pid)
        assert any(_is_python_driver(p) for p in group), "the Python driver must be in spark-submit's group"

        hook.on_kill()

        runner.join(timeout=CANCEL_GRACE_SECONDS + STOP_GRACE_SECONDS + 30)  # at most the hook's grace
        assert not runner.is_alive(), "run() must return once the task is killed"
        _, alive = psutil.wait_procs(group, timeout=15)
        assert alive == [], f"still running after on_kill: {alive}"
        assert len(failures) == 1 and isinstance(failures[0], SparkJobFailed)
    finally:
        if runner.is_alive() and hook.submit_process is not None:
            os.killpg(hook.submit_process.pid, signal.SIGKILL)


def test_driver_stops_itself_when_the_task_process_is_killed_outright(spark_env: Path) -> None:
    task = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("long_job.py")), str(spark_env)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    pgid = None
    try:
        for line in task.stdout:
            if line.startswith("STARTED "):
                pgid = int(line.split()[1])
                break
        assert pgid is not None, "the job never started its statement"
        group = _process_group(pgid)
        assert any(_is_python_driver(p) for p in group)

        task.kill()  # SIGKILL: the task runs no cleanup of its own
        task.wait()

        _, alive = psutil.wait_procs(group, timeout=DEFAULT_DEADLINE_SECONDS + 30)  # the driver's own deadline
        assert alive == [], f"the Spark application outlived its task: {alive}"
    finally:
        task.kill()
        if pgid is not None and _process_group(pgid):
            os.killpg(pgid, signal.SIGKILL)
