"""Starts and stops the demo's Spark Connect server: the venv's pyspark (the server's jar ships in the wheel) on
``local[2]``, on the embedded catalog under the provider's home (free once the per-job examples have ended: Derby
admits one application at a time), listening on a free port of 127.0.0.1.

Usage (AIRFLOW_HOME set, as scripts/setup.sh sets it)::

    python scripts/connect_server.py start LOG   # prints the spark_connect connection (JSON) once it listens
    python scripts/connect_server.py stop        # stops the server start started, if it runs

``start`` fails in one line (exit 1) if the server exits or does not listen within three minutes; its log says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.utils import settings

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_SECONDS = 180
STOP_SECONDS = 30


def pid_file() -> Path:
    return Path(settings.home()) / "connect-server.pid"


def start(log: Path, catalog_conf: dict[str, str] | None = None) -> str:
    """Start the server on ``catalog_conf`` (the embedded catalog's by default); its connection, once it listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = {
        **(catalog_conf or EmbeddedCatalog(home=settings.home()).spark_conf()),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.log.level": "WARN",
        "spark.pyspark.python": sys.executable,
    }
    pid_file().parent.mkdir(parents=True, exist_ok=True)  # before the server starts: ``stop`` must find it
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--class", SERVER_CLASS]
    command += [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [*command, "spark-internal"], env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    pid_file().write_text(str(server.pid))
    deadline = time.monotonic() + START_SECONDS
    while server.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            return json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port})
        time.sleep(0.5)
    stop()
    raise SystemExit(f"error: the Spark Connect server did not start listening on 127.0.0.1:{port}: see {log}")


def stop() -> None:
    path = pid_file()
    if not path.exists():
        return
    pid = int(path.read_text())
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline:
            os.killpg(pid, 0)  # raises ProcessLookupError once the group is gone
            time.sleep(0.2)
        os.killpg(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)


def main(argv: list[str]) -> None:
    if argv[:1] == ["start"] and len(argv) == 2:
        print(start(Path(argv[1])))
    elif argv == ["stop"]:
        stop()
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
