"""Spark drivers as processes: a job stopped in order (its cancel marker, a grace, then its process group), and a
durable job's detached driver, seen from a later try (alive by ``/proc`` on its own machine, how it ended, stopped
when its try was lost).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from typing import Any

from spark_tables.core.durable_job import DriverLaunch
from spark_tables.core.exchange import cancel_uri, spec_uri
from spark_tables.hooks.job_exchange import forget_launched_files, read_launched_spec, started_application, take_result
from spark_tables.hooks.object_storage import storage_path
from spark_tables.utils.log_following import STATE_POLL_SECONDS

#: Seconds a stopped job has to undo what it created and exit, before its process group is ended.
CANCEL_GRACE_SECONDS = 60
#: Seconds between SIGTERM and SIGKILL when the process group is ended.
STOP_GRACE_SECONDS = 3


def stop_process_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # what of the group outlived the JVM, such as the Python driver


#: Seconds a stopped detached driver has to write its result: the task's grace, then the driver's own deadline.
DETACHED_STOP_SECONDS = CANCEL_GRACE_SECONDS + 120


def stop_detached_driver(result_uri: str, log: Any, wait_seconds: float = DETACHED_STOP_SECONDS) -> None:
    """Ask the detached driver of a lost try (its job's result at ``result_uri``) to stop and undo what it created,
    wait for it to say it did (``wait_seconds`` at most), and remove its files. Nothing when that try started no
    durable job, or it ended. A driver that has not answered in time still stops on its own: its files stay for the
    claim's sweep."""
    if read_launched_spec(result_uri) is None:
        return
    result_path = storage_path(result_uri)
    if not result_path.exists():
        log.warning("the lost try's Spark driver may still run: asking it to stop and undo what it created")
        storage_path(cancel_uri(result_uri)).write_text("stop")
        ends = time.monotonic() + wait_seconds
        while not result_path.exists() and time.monotonic() < ends:
            time.sleep(min(STATE_POLL_SECONDS, max(ends - time.monotonic(), 0.0)))
        if not result_path.exists():
            log.warning("the lost try's Spark driver has not answered in %.0f s: it stops on its own", wait_seconds)
            return
    result = take_result(result_path)
    log.info("the lost try's Spark driver: %s", result.error or "succeeded" if result is not None else "no result")
    forget_launched_files(result_uri)


def ended_how(launch: DriverLaunch) -> str:
    """What can be seen of a detached driver that left no result, for the one line that says so."""
    alive = process_alive(launch)
    process = {True: "its process still runs", False: "its process is gone", None: "its process is out of sight"}
    return f"{process[alive]}; its application: {started_application(launch.result_uri) or 'never announced'}"


def process_alive(launch: DriverLaunch) -> bool | None:
    """Whether the launch's spark-submit still runs; None on another machine, where this one cannot see it. The
    process's command line must name the job's spec file (a durable job's spec always goes to one), so a process id
    used again is not taken for it."""
    if launch.host != socket.gethostname():
        return None
    try:
        with open(f"/proc/{launch.pid}/cmdline", "rb") as handle:
            command = handle.read()
    except OSError:
        return False
    return spec_uri(launch.result_uri).encode() in command
