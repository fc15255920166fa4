"""Following what another process writes and does, which sends no event: a log file's lines as they come, and a
state asked for at intervals."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

#: Seconds between two looks at a detached driver, when its log has nothing new.
FOLLOW_POLL_SECONDS = 0.5
#: Seconds between two questions about a lost try's driver (its files, the master's JSON) while following its log.
STATE_POLL_SECONDS = 5.0


def follow_log(path: str, ended: Callable[[], bool], ask_every: float = STATE_POLL_SECONDS) -> Iterator[str]:
    """The lines of a log file another process writes, as they come, until ``ended()`` says it is done; then the
    rest. ``ended`` is asked at most every ``ask_every`` seconds while the file has nothing new."""
    asked: float | None = None
    with open(path, encoding="utf-8", errors="replace") as handle:
        partial = ""
        while True:
            chunk = handle.readline()
            if chunk:
                partial += chunk
                if partial.endswith("\n"):
                    yield partial
                    partial = ""
                continue
            if asked is None or time.monotonic() - asked >= ask_every:
                asked = time.monotonic()
                if ended():
                    rest = partial + handle.read()
                    yield from rest.splitlines(keepends=True)
                    return
            time.sleep(FOLLOW_POLL_SECONDS)


def wait_until(ended: Callable[[], bool]) -> None:
    """Ask ``ended`` every ``STATE_POLL_SECONDS`` until it says yes: another process's state, which sends no event."""
    while not ended():
        time.sleep(STATE_POLL_SECONDS)
