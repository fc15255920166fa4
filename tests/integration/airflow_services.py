"""A running Airflow: API server, scheduler (LocalExecutor) and DAG processor, driven through the REST API."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tests.integration.conftest import VENV_BIN, Deployment

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 180, every: float = 0.5) -> T:
    """Poll ``probe`` until it returns something truthy: for state in other processes, which sends no events."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class AirflowServices:
    def __init__(self, deployment: Deployment, dags_folder: Path) -> None:
        self.port = _free_port()
        self.home = deployment.home
        self.env = {
            **deployment.env,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        }
        self._processes: list[subprocess.Popen[bytes]] = []
        self._token = ""

    def start(self) -> None:
        for command in (["api-server", "--port", str(self.port)], ["scheduler"], ["dag-processor"]):
            log = open(self.home / f"{command[0]}.log", "wb")  # noqa: SIM115 - closed with the process
            self._processes.append(
                subprocess.Popen(
                    [str(VENV_BIN / "airflow"), *command],
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        wait_for("the API server", self._healthy, timeout=120)
        self._token = json.loads(urllib.request.urlopen(self._url("/auth/token")).read())["access_token"]

    def stop(self) -> None:
        for process in self._processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            self._url(f"/api/v2{path}"),
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as response:
            body = response.read()
        return json.loads(body) if body else None

    def plugin(self, path: str) -> Any:
        """The monitoring plugin's JSON at ``path`` (under ``/spark-tables/api``), as this API server serves it."""
        request = urllib.request.Request(
            self._url(f"/spark-tables/api{path}"), headers={"Authorization": f"Bearer {self._token}"}
        )
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())

    def page(self, path: str) -> str:
        """The monitoring plugin's page at ``path`` (under ``/spark-tables``)."""
        request = urllib.request.Request(
            self._url(f"/spark-tables{path}"), headers={"Authorization": f"Bearer {self._token}"}
        )
        with urllib.request.urlopen(request) as response:
            return response.read().decode()

    def trigger(self, dag_id: str, conf: dict[str, Any]) -> str:
        wait_for(f"{dag_id} to be parsed", lambda: self._exists(f"/dags/{dag_id}"))
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        body = {"logical_date": None, "conf": conf}
        return self.api("POST", f"/dags/{dag_id}/dagRuns", body)["dag_run_id"]

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.task_instance(dag_id, run_id, task_id)["state"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> str:
        path = (
            self.home
            / "logs"
            / f"dag_id={dag_id}"
            / f"run_id={run_id}"
            / f"task_id={task_id}"
            / f"attempt={attempt}.log"
        )
        return path.read_text() if path.exists() else ""

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        entry = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value")
        return entry["value"]

    def _url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _healthy(self) -> bool:
        with contextlib.suppress(OSError):
            health = json.loads(urllib.request.urlopen(self._url("/api/v2/monitor/health")).read())
            return health["scheduler"]["status"] == "healthy" and health["dag_processor"]["status"] == "healthy"
        return False

    def _exists(self, path: str) -> bool:
        with contextlib.suppress(OSError):
            self.api("GET", path)
            return True
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_airflow(deployment: Deployment, dags_folder: Path) -> Iterator[AirflowServices]:
    services = AirflowServices(deployment, dags_folder)
    try:
        services.start()
        yield services
    finally:
        services.stop()
