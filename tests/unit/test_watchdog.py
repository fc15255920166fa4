from __future__ import annotations

import os
import subprocess

import pytest

from spark_tables.jobs import watchdog


@pytest.fixture
def finished_pid() -> int:
    """The pid of a child process that has exited and been reaped."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_this_process_is_alive():
    assert watchdog._alive(os.getpid()) is True


def test_a_finished_process_is_not_alive(finished_pid):
    assert watchdog._alive(finished_pid) is False


def test_a_process_we_may_not_signal_counts_as_alive(monkeypatch):
    def refuse(pid, signal):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(watchdog.os, "kill", refuse)

    assert watchdog._alive(12345) is True


def test_watch_parent_exits_with_the_orphaned_code_when_the_parent_is_gone(monkeypatch, finished_pid):
    exit_codes: list[int] = []
    monkeypatch.setattr(watchdog.os, "_exit", exit_codes.append)

    thread = watchdog.watch_parent(finished_pid, interval_seconds=0.01)
    thread.join(timeout=10)

    assert not thread.is_alive()
    assert exit_codes == [watchdog.EXIT_CODE_ORPHANED]


def test_watch_parent_runs_as_a_daemon_thread(monkeypatch, finished_pid):
    monkeypatch.setattr(watchdog.os, "_exit", lambda code: None)

    thread = watchdog.watch_parent(finished_pid)
    thread.join(timeout=10)

    assert thread.daemon
