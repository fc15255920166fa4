"""What of ``airflow standalone`` is still running (scripts/airflow.sh runs this in the venv before it kills it):

    python scripts/standalone_left.py STANDALONE_PID

prints one line naming each process of STANDALONE_PID's session by the component it belongs to, as a user knows them,
``triggerer (pids 4242, 4250), scheduler (pid 4201)``: the component whose command (``airflow triggerer``) it or an
ancestor has. A process's own command line cannot name it: a component's children retitle themselves (``airflow
serve-logs``), and a title is cut to the room the first command line had, which depends on how long the checkout's
path is.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict

import psutil

#: ``airflow standalone``'s components, by the word of their command; the API server retitles itself ``api_server``.
COMPONENTS = ("scheduler", "dag-processor", "api-server", "triggerer")


def component(process: psutil.Process, standalone: int) -> str:
    """The component ``process`` belongs to: ``standalone`` itself, the first of ``COMPONENTS`` its own command or an
    ancestor's names (a component's children are retitled, and ``airflow standalone`` may have ended already, its
    components then children of init), or else its own name."""
    if process.pid == standalone:
        return "standalone"
    for ancestor in [process, *process.parents()]:
        words = " ".join(ancestor.cmdline()).replace("_", "-").split()
        named = next((name for name in COMPONENTS if name in words), None)
        if named is not None:
            return named
    return process.name()


def left(standalone: int) -> str:
    pids: dict[str, list[int]] = defaultdict(list)
    for process in psutil.process_iter():
        try:
            if process.status() != psutil.STATUS_ZOMBIE and os.getsid(process.pid) == standalone:
                pids[component(process, standalone)].append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, OSError):  # gone meanwhile
            continue
    return ", ".join(f"{name} ({_pids(numbers)})" for name, numbers in pids.items())


def _pids(numbers: list[int]) -> str:
    return ("pid " if len(numbers) == 1 else "pids ") + ", ".join(map(str, sorted(numbers)))


if __name__ == "__main__":
    print(left(int(sys.argv[1])) or "nothing")
