"""Airflow's API server on loopback with the provider's plugin, for the monitoring tests: its own Airflow home, the
tests' auth manager (``monitoring_auth``: alice is an admin, bob a viewer denied ``secret_monitored``), and the
runs of the DAGs it is given."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.airflow_services import _free_port, login, wait_for
from tests.integration.conftest import REPO, VENV_BIN, _base_env, _migrated

USERS = "alice:admin,bob:viewer,carol:viewer"
#: A connection whose password must never reach a page.
SECRET = "s3cr3t-monitoring-password"


@dataclass
class Response:
    status: int
    body: str
    content_type: str

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class ApiServer:
    home: Path
    port: int
    env: dict[str, str]
    #: The path of ``[api] base_url``, under which the server serves everything ("" at the root).
    base_path: str = ""

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}{path}"

    def get(self, path: str, token: str | None = None, cookie: str | None = None) -> Response:
        return self.request("GET", path, token, cookie=cookie)

    def request(
        self, method: str, path: str, token: str | None = None, body: Any = None, cookie: str | None = None
    ) -> Response:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if cookie is not None:
            headers["Cookie"] = f"_token={cookie}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url(path), data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request) as response:
                return Response(response.status, response.read().decode(), response.headers["content-type"] or "")
        except urllib.error.HTTPError as err:
            return Response(err.code, err.read().decode(), err.headers["content-type"] or "")

    def token(self, user: str) -> str:
        """A JWT for ``user``, logged in with its password as the UI logs in."""
        return login(self.url("/auth/token"), self.home, user)

    def run_id(self, dag_id: str) -> str:
        with sqlite3.connect(self.home / "airflow.db") as db:
            return db.execute("SELECT run_id FROM dag_run WHERE dag_id = ?", (dag_id,)).fetchone()[0]

    def xcom(self, dag_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        with sqlite3.connect(self.home / "airflow.db") as db:
            row = db.execute(
                "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = ? AND map_index = ?",
                (dag_id, task_id, key, map_index),
            ).fetchone()
        assert row is not None, f"no XCom {key} of {dag_id}.{task_id}[{map_index}]"
        return json.loads(row[0])


@contextlib.contextmanager
def api_server(
    home: Path,
    dags_folder: Path,
    dag_ids: list[str],
    base_path: str = "",
    failing: tuple[str, ...] = (),
    **settings: str,
) -> Iterator[ApiServer]:
    """Run each DAG once (``airflow dags test``; those in ``failing`` must fail), then serve the API on a free
    loopback port until the end, under ``base_path`` (``[api] base_url``'s path) when one is given."""
    port = _free_port()
    env = {
        **_base_env(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__AUTH_MANAGER": "tests.integration.monitoring_auth.DenyingAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": USERS,
        "AIRFLOW__API_AUTH__JWT_SECRET": "monitoring-tests-" + "x" * 64,
        "AIRFLOW__API__SECRET_KEY": "monitoring-tests",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}{base_path}/",
        "AIRFLOW_CONN_MONITORED_SECRET": json.dumps(
            {"conn_type": "postgres", "host": "127.0.0.1", "login": "reader", "password": SECRET}
        ),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        **settings,
    }
    _migrated(home, env)
    for dag_id in dag_ids:
        done = subprocess.run(
            [str(VENV_BIN / "airflow"), "dags", "test", dag_id], env=env, capture_output=True, text=True, check=False
        )
        assert (done.returncode != 0) == (dag_id in failing), done.stdout[-3000:] + done.stderr[-3000:]
    server = ApiServer(home, port, env, base_path)
    log = open(home / "api-server.log", "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [str(VENV_BIN / "airflow"), "api-server", "-H", "127.0.0.1", "-p", str(server.port), "-w", "1"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for("the API server", lambda: _healthy(server) or _exited(process, home), timeout=120)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def _healthy(server: ApiServer) -> bool:
    with contextlib.suppress(OSError):
        return server.get("/api/v2/monitor/health").status == 200
    return False


def _exited(process: subprocess.Popen[bytes], home: Path) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"the API server exited: {(home / 'api-server.log').read_text()[-3000:]}")
    return False
