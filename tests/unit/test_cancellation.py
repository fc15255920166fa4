"""Cancellation and watch: how a running job learns it must stop, interrupts its Spark jobs and exits in time."""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
import uuid

import pytest

from spark_tables.core.errors import JobError
from spark_tables.jobs import cancellation
from spark_tables.jobs.cancellation import EXIT_CODE_CANCELLED, Cancellation, JobCancelled, watch

#: Seconds a test waits for the watch thread before failing; it normally finishes in milliseconds.
_WAIT = 10


@pytest.fixture
def finished_pid() -> int:
    """The pid of a child process that has exited and been reaped."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture
def exits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, float]]:
    """The exit codes the watch thread ended the process with, and when, instead of ending it."""
    calls: list[tuple[int, float]] = []
    monkeypatch.setattr(cancellation.os, "_exit", lambda code: calls.append((code, time.monotonic())))
    return calls


class _TimedCancellation(Cancellation):
    """Records when the stop was first asked for."""

    requested_at: float | None = None

    def request(self, reason: str) -> None:
        if self.requested_at is None:
            self.requested_at = time.monotonic()
        super().request(reason)


def _counting(function, calls_before_event: int):
    """Wrap ``function`` to count its calls and set an event once it has been called ``calls_before_event`` times."""
    reached = threading.Event()
    calls: list[int] = []

    def wrapper(*args):
        calls.append(1)
        if len(calls) >= calls_before_event:
            reached.set()
        return function(*args)

    return reached, wrapper


def test_a_new_cancellation_is_not_requested():
    stop = Cancellation()

    assert stop.requested is False
    assert stop.reason == ""
    stop.check()


def test_request_sets_requested_and_reason_and_interrupts_once():
    interrupts: list[int] = []
    stop = Cancellation()
    stop.interrupt_with(lambda: interrupts.append(1))

    stop.request("the task was marked failed")

    assert stop.requested is True
    assert stop.reason == "the task was marked failed"
    assert interrupts == [1]


def test_a_second_request_changes_nothing():
    interrupts: list[int] = []
    stop = Cancellation()
    stop.interrupt_with(lambda: interrupts.append(1))
    stop.request("first")

    stop.request("second")

    assert stop.reason == "first"
    assert interrupts == [1]


def test_a_request_before_there_is_a_session_needs_no_interrupt():
    stop = Cancellation()

    stop.request("early")

    assert stop.requested is True


def test_interrupt_with_does_not_interrupt_before_a_request():
    interrupts: list[int] = []

    Cancellation().interrupt_with(lambda: interrupts.append(1))

    assert interrupts == []


def test_interrupt_with_after_a_request_interrupts_at_once():
    interrupts: list[int] = []
    stop = Cancellation()
    stop.request("early")

    stop.interrupt_with(lambda: interrupts.append(1))

    assert interrupts == [1]


def test_check_raises_job_cancelled_only_after_a_request():
    stop = Cancellation()
    stop.check()
    stop.request("the task timed out")

    with pytest.raises(JobCancelled) as caught:
        stop.check()

    assert str(caught.value) == "cancelled: the task timed out"
    assert str(caught.value).startswith("cancelled: ")
    assert isinstance(caught.value, JobError)


def test_an_interrupt_that_fails_is_logged_not_raised(caplog):
    def fail():
        raise RuntimeError("session stopped")

    stop = Cancellation()
    stop.interrupt_with(fail)

    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        stop.request("asked")

    assert stop.requested is True
    assert "could not interrupt the running Spark operations" in caplog.text
    with pytest.raises(JobCancelled):
        stop.check()


def test_an_interrupt_that_fails_when_given_late_is_logged_not_raised(caplog):
    stop = Cancellation()
    stop.request("asked")

    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        stop.interrupt_with(lambda: 1 / 0)

    assert "could not interrupt the running Spark operations" in caplog.text


def test_interrupt_running_does_nothing_without_a_way_to_interrupt():
    Cancellation().interrupt_running()


def test_interrupt_running_interrupts_with_or_without_a_request():
    interrupts: list[int] = []
    stop = Cancellation()
    stop.interrupt_with(lambda: interrupts.append(1))

    stop.interrupt_running()
    stop.request("asked")
    stop.interrupt_running()

    assert interrupts == [1, 1, 1]


def test_interrupt_running_logs_what_it_interrupted(caplog):
    stop = Cancellation()
    stop.interrupt_with(lambda: ["op-1", "op-2"])

    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        stop.interrupt_running()

    assert "interrupted Spark operation(s) op-1, op-2" in caplog.text


def test_interrupt_running_logs_nothing_when_nothing_ran(caplog):
    stop = Cancellation()
    stop.interrupt_with(list)

    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        stop.interrupt_running()

    assert "interrupted" not in caplog.text


def test_interrupt_running_that_fails_is_logged_not_raised(caplog):
    stop = Cancellation()
    stop.interrupt_with(lambda: 1 / 0)

    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        stop.interrupt_running()

    assert "could not interrupt the running Spark operations" in caplog.text
    assert stop.requested is False


def test_a_request_is_logged_with_its_reason(caplog):
    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        Cancellation().request("the task process is gone")

    assert "stopping: the task process is gone" in caplog.text


def test_this_process_is_alive():
    assert cancellation._alive(os.getpid()) is True


def test_a_finished_process_is_not_alive(finished_pid):
    assert cancellation._alive(finished_pid) is False


def test_a_process_we_may_not_signal_counts_as_alive(monkeypatch):
    def refuse(pid, signal):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(cancellation.os, "kill", refuse)

    assert cancellation._alive(12345) is True


@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file-uri"])
def test_a_local_marker_is_found_by_path_or_file_uri(tmp_path, as_uri):
    marker = tmp_path / "r.cancel"
    uri = marker.as_uri() if as_uri else str(marker)
    assert cancellation._marker_exists(uri) is False

    marker.write_text("stop")

    assert cancellation._marker_exists(uri) is True


def test_a_remote_marker_is_looked_up_through_fsspec():
    fsspec = pytest.importorskip("fsspec")
    uri = f"memory://spark_tables_tests/{uuid.uuid4().hex}.cancel"
    file_system = fsspec.filesystem("memory")
    assert cancellation._marker_exists(uri) is False

    file_system.pipe(uri, b"stop")
    try:
        assert cancellation._marker_exists(uri) is True
    finally:
        file_system.rm(uri)


def test_watch_stops_the_job_when_the_parent_is_gone_then_exits(exits, finished_pid):
    interrupts: list[int] = []
    stop = Cancellation()
    stop.interrupt_with(lambda: interrupts.append(1))

    thread = watch(stop, parent_pid=finished_pid, marker_uri=None, interval_seconds=0.01, deadline_seconds=0.01)
    thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert stop.requested is True
    assert stop.reason == f"the Airflow task process {finished_pid} is gone"
    assert interrupts  # at the request, and again until the deadline
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]


@pytest.mark.parametrize("as_uri", [False, True], ids=["path", "file-uri"])
def test_watch_stops_the_job_when_the_marker_exists_then_exits(exits, tmp_path, as_uri):
    marker = tmp_path / "r.cancel"
    marker.write_text("stop")
    stop = Cancellation()

    thread = watch(
        stop,
        parent_pid=os.getpid(),
        marker_uri=marker.as_uri() if as_uri else str(marker),
        interval_seconds=0.01,
        deadline_seconds=0.01,
    )
    thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert stop.requested is True
    assert "the Airflow task asked to stop" in stop.reason
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]


def test_watch_notices_a_marker_written_while_it_watches(exits, monkeypatch, tmp_path):
    marker = tmp_path / "r.cancel"
    real_marker_exists = cancellation._marker_exists

    def write_on_third_look(uri):
        looks.append(1)
        if len(looks) == 3:
            marker.write_text("stop")
        return real_marker_exists(uri)

    looks: list[int] = []
    monkeypatch.setattr(cancellation, "_marker_exists", write_on_third_look)
    stop = Cancellation()

    thread = watch(stop, parent_pid=None, marker_uri=str(marker), interval_seconds=0.01, deadline_seconds=0.01)
    thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert stop.requested is True
    assert len(looks) == 3
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]


def test_watch_exits_only_after_the_deadline(exits, finished_pid):
    deadline = 0.2
    stop = _TimedCancellation()

    thread = watch(stop, parent_pid=finished_pid, marker_uri=None, interval_seconds=0.01, deadline_seconds=deadline)
    thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert len(exits) == 1
    code, exited_at = exits[0]
    assert code == EXIT_CODE_CANCELLED
    assert exited_at - stop.requested_at >= deadline * 0.9


def test_watch_does_not_stop_a_job_whose_parent_lives_and_marker_is_absent(exits, monkeypatch, tmp_path):
    reached, counting_alive = _counting(cancellation._alive, calls_before_event=5)
    monkeypatch.setattr(cancellation, "_alive", counting_alive)
    stop = Cancellation()

    thread = watch(
        stop,
        parent_pid=os.getpid(),
        marker_uri=str(tmp_path / "r.cancel"),
        interval_seconds=0.01,
        deadline_seconds=0.01,
    )
    try:
        assert reached.wait(timeout=_WAIT)
        assert stop.requested is False
        assert exits == []
        assert thread.is_alive()
    finally:
        stop.request("the test is over")
        thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert stop.reason == "the test is over"
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]


def test_watch_without_a_parent_only_looks_for_the_marker(exits, monkeypatch, tmp_path):
    def never_called(pid):
        raise AssertionError("no parent to watch")

    reached, counting_marker = _counting(cancellation._marker_exists, calls_before_event=5)
    monkeypatch.setattr(cancellation, "_alive", never_called)
    monkeypatch.setattr(cancellation, "_marker_exists", counting_marker)
    stop = Cancellation()

    thread = watch(
        stop, parent_pid=None, marker_uri=str(tmp_path / "r.cancel"), interval_seconds=0.01, deadline_seconds=0.01
    )
    try:
        assert reached.wait(timeout=_WAIT)
        assert stop.requested is False
        assert thread.is_alive()
    finally:
        stop.request("the test is over")
        thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]


def test_watch_runs_as_a_named_daemon_thread(exits, finished_pid):
    thread = watch(
        Cancellation(), parent_pid=finished_pid, marker_uri=None, interval_seconds=0.01, deadline_seconds=0.01
    )
    thread.join(timeout=_WAIT)

    assert thread.daemon
    assert thread.name == "spark-tables-cancellation"


def test_watch_interrupts_an_operation_started_after_the_request(exits, finished_pid, caplog):
    running: list[str] = []
    interrupted: list[list[str]] = []
    third_call = threading.Event()

    def interrupt():
        stopped, running[:] = list(running), []
        interrupted.append(stopped)
        if len(interrupted) == 1:
            running.append("op-started-after-the-request")  # the job, between two steps, starts another one
        if len(interrupted) == 3:
            third_call.set()
        return stopped

    stop = Cancellation()
    stop.interrupt_with(interrupt)

    with caplog.at_level(logging.WARNING, logger=cancellation.__name__):
        thread = watch(stop, parent_pid=finished_pid, marker_uri=None, interval_seconds=0.01, deadline_seconds=0.5)
        assert third_call.wait(timeout=_WAIT)
        assert exits == []  # the deadline is not reached yet
        thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert interrupted[:3] == [[], ["op-started-after-the-request"], []]
    assert running == []
    assert "interrupted Spark operation(s) op-started-after-the-request" in caplog.text
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]


def test_watch_keeps_interrupting_when_an_interrupt_fails(exits, finished_pid):
    calls: list[int] = []
    third_call = threading.Event()

    def failing_interrupt():
        calls.append(1)
        if len(calls) == 3:
            third_call.set()
        raise RuntimeError("session is stopping")

    stop = Cancellation()
    stop.interrupt_with(failing_interrupt)

    thread = watch(stop, parent_pid=finished_pid, marker_uri=None, interval_seconds=0.01, deadline_seconds=0.5)
    assert third_call.wait(timeout=_WAIT)
    thread.join(timeout=_WAIT)

    assert not thread.is_alive()
    assert [code for code, _ in exits] == [EXIT_CODE_CANCELLED]
