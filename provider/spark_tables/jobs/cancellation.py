"""How a running job learns it must stop, and stops in order: its Spark jobs interrupted, its cleanup run.

Two things ask: the task, by writing a marker file beside the job's result (``on_kill``: a user marked the task
failed, ``execution_timeout``, SIGTERM), and the task's disappearance (killed outright, out of memory), noticed
by watching its process id in client mode. Either way the running Spark jobs are interrupted so the job's code
regains control at once and can undo what it created (the FLIP-218 JobStatusHook's onCanceled) before it exits.
If it has not exited ``deadline_seconds`` later, the process ends regardless.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_tables.core.errors import JobError
from spark_tables.jobs import files

log = logging.getLogger(__name__)

EXIT_CODE_CANCELLED = 143
DEFAULT_DEADLINE_SECONDS = 120.0


class JobCancelled(JobError):
    """The job was asked to stop; the message says who asked."""


class Cancellation:
    """Whether, and why, this job was asked to stop; ``interrupt`` stops the Spark jobs running for it."""

    def __init__(self) -> None:
        self._requested = threading.Event()
        self._reason = ""
        self._interrupt: Callable[[], Any] | None = None
        self._taken_effect = False

    @property
    def requested(self) -> bool:
        return self._requested.is_set()

    @property
    def reason(self) -> str:
        return self._reason

    def interrupt_with(self, interrupt: Callable[[], Any]) -> None:
        """Say how to interrupt running Spark jobs, once there is a session; a request already made uses it now."""
        self._interrupt = interrupt
        if self.requested:
            self.interrupt_running()

    def request(self, reason: str) -> None:
        if self.requested:
            return
        self._reason = reason
        self._requested.set()
        log.warning("stopping: %s", reason)
        self.interrupt_running()

    @property
    def taken_effect(self) -> bool:
        """Whether the request has reached the job's code: an interruption stopped a running operation (which fails
        in the job's code), or the job's ``check`` raised. From then on the job is undoing what it created, and its
        cleanup's own operations must not be interrupted."""
        return self._taken_effect

    def check(self) -> None:
        """Raise ``JobCancelled`` if a stop was asked for: called between the steps of a job."""
        if self.requested:
            self._taken_effect = True
            raise JobCancelled(f"cancelled: {self._reason}")

    def interrupt_running(self) -> None:
        """Interrupt the Spark operations running now; after a request, called again for any started later."""
        if self._interrupt is None:
            return
        try:
            interrupted = self._interrupt()
        except Exception:  # the session may be stopping already; the job's next check stops it
            log.warning("could not interrupt the running Spark operations", exc_info=True)
            return
        if interrupted:
            self._taken_effect = True
            log.warning("interrupted Spark operation(s) %s", ", ".join(map(str, interrupted)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _marker_exists(uri: str) -> bool:
    return files.exists(uri)


def watch(
    cancellation: Cancellation,
    *,
    parent_pid: int | None,
    marker_uri: str | None,
    interval_seconds: float = 0.5,
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
) -> threading.Thread:
    """Watch the task process and the cancel marker; on either, request the stop, then enforce the deadline.

    Until the deadline, Spark operations are interrupted again every other interval: one that started after
    the request (the job between two steps) is stopped too.
    """

    def run() -> None:
        while not cancellation.requested:
            if parent_pid is not None and not _alive(parent_pid):
                cancellation.request(f"the Airflow task process {parent_pid} is gone")
            elif marker_uri is not None and _marker_exists(marker_uri):
                cancellation.request("the Airflow task asked to stop (task killed, marked failed or timed out)")
            else:
                time.sleep(interval_seconds)
        ends = time.monotonic() + deadline_seconds
        while time.monotonic() < ends:
            time.sleep(min(2 * interval_seconds, max(ends - time.monotonic(), 0)))
            cancellation.interrupt_running()
        log.error("still running %.0f s after the stop was asked for: exiting", deadline_seconds)
        os._exit(EXIT_CODE_CANCELLED)

    thread = threading.Thread(target=run, name="spark-tables-cancellation", daemon=True)
    thread.start()
    return thread
