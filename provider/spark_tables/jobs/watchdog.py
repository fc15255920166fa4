"""Stops the driver when the Airflow task process that submitted it is gone.

A task killed outright (SIGKILL, out of memory) runs no cleanup of its own, and spark-submit runs in its own
process group, so nothing else would stop a client-mode driver that outlived its task.
"""

from __future__ import annotations

import logging
import os
import threading
import time

log = logging.getLogger(__name__)

EXIT_CODE_ORPHANED = 143


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch_parent(pid: int, interval_seconds: float = 1.0) -> threading.Thread:
    def run() -> None:
        while _alive(pid):
            time.sleep(interval_seconds)
        log.error("the Airflow task process %d is gone: stopping this Spark driver", pid)
        os._exit(EXIT_CODE_ORPHANED)

    thread = threading.Thread(target=run, name="spark-tables-watchdog", daemon=True)
    thread.start()
    return thread
