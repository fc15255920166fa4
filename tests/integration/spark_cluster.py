"""A Spark standalone cluster on loopback, started from the pyspark installation in the venv: a master and
``SPARK_WORKERS`` workers, each with its own JVM, ports and work folder, as ``tests/integration/as_deployed.py`` and
docker/compose.yaml size them.

Executors run in the workers' JVMs, not the driver's, so whatever works only because driver and executors share a
process or a temporary folder shows up on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import QUICK_JIT
from tests.integration.airflow_services import _free_port as free_port
from tests.integration.airflow_services import wait_for
from tests.integration.as_deployed import (
    SPARK_MASTER_CONF,
    SPARK_WORKER_CORES,
    SPARK_WORKER_MEMORY,
    SPARK_WORKERS,
    java_options,
)

VENV_BIN = Path(sys.executable).parent
#: Seconds a master and its workers have to start and register (a JVM's start on a busy 2-core machine).
START_SECONDS = 120
#: Seconds each JVM has to exit after SIGTERM before it is killed.
STOP_SECONDS = 20


class SparkCluster:
    """A running standalone master and its workers, each a process group of its own (a worker's executors are its
    children)."""

    def __init__(self, root: Path, workers: int = SPARK_WORKERS) -> None:
        self.root = root
        self.port, self.ui_port, self.rest_port = free_port(), free_port(), free_port()
        self._workers = workers
        #: A folder of the driver's machine that the workers do not see: a tmpfs hides it in their mount namespace,
        #: as a local disk of the Airflow worker's machine would be hidden from Spark's machines.
        self.driver_only = root / "driver-only"
        self._master: subprocess.Popen[bytes] | None = None
        self._worker_processes: list[subprocess.Popen[bytes]] = []
        self._worker_ui_ports: list[int] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def rest_url(self) -> str:
        """The master's REST submission server (``spark.master.rest.enabled``): driver status and kills."""
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self) -> None:
        master_conf = {**SPARK_MASTER_CONF, "spark.master.rest.port": str(self.rest_port)}
        self._master = self._spark_class(
            "master",
            [
                *("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"),
                *("--port", str(self.port), "--webui-port", str(self.ui_port)),
            ],
            {"SPARK_MASTER_OPTS": java_options(master_conf)},
        )
        wait_for("the Spark master's JSON API", self._state, timeout=START_SECONDS)
        self.driver_only.mkdir()
        for index in range(self._workers):
            work = self.root / f"worker-{index}"
            for folder in ("local", "tmp"):
                (work / folder).mkdir(parents=True)
            self._worker_ui_ports.append(free_port())
            self._worker_processes.append(self._start_worker(index))
        wait_for(f"{self._workers} ALIVE Spark workers", self._all_alive, timeout=START_SECONDS)

    def _start_worker(self, index: int) -> subprocess.Popen[bytes]:
        work = self.root / f"worker-{index}"
        return self._spark_class(
            f"worker-{index}",
            [
                *("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"),
                *("--port", str(free_port()), "--webui-port", str(self._worker_ui_ports[index])),
                *("--cores", str(SPARK_WORKER_CORES), "--memory", SPARK_WORKER_MEMORY),
                *("--work-dir", str(work / "work"), self.master_url),
            ],
            # Shuffle and spill files, and the temporary files of its executors' Python workers, in the worker's
            # own folders: not a /tmp that every JVM here, the driver's too, shares. Its executors inherit the
            # tests' Java option for short-lived JVMs.
            {"SPARK_LOCAL_DIRS": str(work / "local"), "TMPDIR": str(work / "tmp"), "JAVA_TOOL_OPTIONS": QUICK_JIT},
            hide=self.driver_only,
        )

    def applications(self) -> list[dict[str, Any]]:
        """The master's active and completed applications, as its JSON API lists them."""
        state = self._state() or {}
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def workers(self) -> list[dict[str, Any]]:
        """The workers the master knows, as its JSON API lists them (``state``: ALIVE, DEAD, ...)."""
        return (self._state() or {}).get("workers", [])

    def executors(self, application_id: str) -> list[dict[str, Any]]:
        """The executors the workers ran or run for the application, as the workers' JSON APIs list them (each
        with the ``worker`` it ran on): processes the workers started, not the driver."""
        found = []
        for index, port in enumerate(self._worker_ui_ports):
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5).read())
                found += [
                    {**executor, "worker": index, "finished": finished}
                    for finished, listed in ((False, state["executors"]), (True, state["finishedexecutors"]))
                    for executor in listed
                    if executor["appid"] == application_id
                ]
        return found

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index``'s JVM, as a lost machine would go; its executors notice and exit."""
        os.kill(self._worker_processes[index].pid, signal.SIGKILL)
        self._worker_processes[index].wait()

    def restart_worker(self, index: int) -> None:
        """Start worker ``index`` again after ``kill_worker``, and wait until every worker is ALIVE again."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._worker_processes[index].pid, signal.SIGKILL)  # its executors, if any outlived it
        self._worker_processes[index] = self._start_worker(index)
        wait_for(f"{self._workers} ALIVE Spark workers", self._all_alive, timeout=START_SECONDS)

    def stop(self) -> None:
        processes = [*self._worker_processes, *([self._master] if self._master else [])]
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # what of the group outlived its JVM (an executor)
            process.wait()

    def _spark_class(
        self, name: str, arguments: list[str], env: dict[str, str], hide: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a daemon of the Spark distribution; with ``hide``, in a mount namespace of its own where a tmpfs
        covers that folder (``unshare`` execs the shell, which execs spark-class, which execs java: one process)."""
        command = [str(VENV_BIN / "spark-class"), *arguments]
        if hide is not None:
            unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--mount"]
            hidden = 'mount -t tmpfs spark-worker-only "$0" && exec "$@"'
            command = [*unshare, "sh", "-c", hidden, str(hide), *command]
        env = {
            **os.environ,
            # Python workers of executors run this venv's Python, which has pyspark and the jobs' packages.
            "PYSPARK_PYTHON": sys.executable,
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.root),
            **env,
        }
        with open(self.root / f"{name}.log", "wb") as log:
            return subprocess.Popen(
                command,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _state(self) -> dict[str, Any] | None:
        with contextlib.suppress(OSError, ValueError):
            return json.loads(urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5).read())
        return None

    def _all_alive(self) -> bool:
        alive = [worker for worker in self.workers() if worker["state"] == "ALIVE"]
        return len(alive) == self._workers


@contextlib.contextmanager
def running_spark_cluster(root: Path) -> Iterator[SparkCluster]:
    cluster = SparkCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
