"""What the tests' servers on loopback share (scripts/kafka_broker.py, scripts/s3_server.py): a free port, and the
stop of a server started in a process group of its own, its pid kept in a file of its folder."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_server(home: Path, pid_file: str) -> None:
    """Kill the process group whose pid ``home / pid_file`` holds (the tests' data goes with it: no clean shutdown to
    wait for), wait until it is gone, and remove ``home``."""
    pid_path = home / pid_file
    if pid_path.exists():
        pid = int(pid_path.read_text())
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        else:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:  # started by another process: wait until it is gone
                while os.path.exists(f"/proc/{pid}"):
                    time.sleep(0.05)
    shutil.rmtree(home, ignore_errors=True)
