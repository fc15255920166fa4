"""Airflow as deployed, driven through the REST API: the API server, scheduler, DAG processor, triggerer and a
Celery worker as processes of their own, on a PostgreSQL metadata DB, with the CeleryExecutor and Redis as its
broker; their settings come from ``as_deployed`` (which docker/compose.yaml shares)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import redis

from tests.integration.as_deployed import AIRFLOW_COMPONENTS, airflow_settings
from tests.integration.conftest import VENV_BIN, Deployment, ExampleRun

T = TypeVar("T")

#: The broker: Redis on loopback, shared by whatever runs tests here (scripts/test.sh starts it when it is down).
REDIS = os.environ.get("SPARK_TABLES_TEST_REDIS", "127.0.0.1:6379")
#: The simple auth manager's users (name:role); their passwords are in the home's generated passwords file.
USERS = "admin:admin,viewer:viewer"
#: The one component started apart, and again after ``kill_worker``.
_CELERY_WORKER = ("celery", "worker")
#: In a Redis database a test session uses: who it is; the key that claims the database.
_REDIS_OWNER_KEY = "spark_tables_tests:owner"
#: Databases a test session may claim: 0 is compose's; Redis has 16 by default.
_REDIS_DATABASES = range(1, 16)
#: A claim outlives a test session that died without releasing it by this long at most.
_REDIS_CLAIM_SECONDS = 6 * 3600


def password(home: Path, user: str) -> str:
    """The password an API server whose Airflow home is ``home`` generated for ``user`` at its first start."""
    return json.loads((home / "simple_auth_manager_passwords.json.generated").read_text())[user]


def login(token_url: str, home: Path, user: str) -> str:
    """A JWT for ``user`` from the API server's ``/auth/token``, logged in with its password as the UI logs in."""
    body = json.dumps({"username": user, "password": password(home, user)}).encode()
    request = urllib.request.Request(token_url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())["access_token"]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 180, every: float = 0.5) -> T:
    """Poll ``probe`` until it returns something truthy: for state in other processes, which sends no events."""
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        value = probe()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def redis_database() -> Iterator[int]:
    """A Redis database of this test session's own, claimed atomically (``SET NX``) among 1-15: the first that no
    other session claimed and nothing else uses. Emptied when the session ends."""
    host, port = REDIS.rsplit(":", 1)
    me = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"
    for number in _REDIS_DATABASES:
        client = redis.Redis(host=host, port=int(port), db=number)
        if client.set(_REDIS_OWNER_KEY, me, nx=True, ex=_REDIS_CLAIM_SECONDS):
            if client.dbsize() == 1:
                break
            client.delete(_REDIS_OWNER_KEY)  # in use by something that does not claim databases
        client.close()
    else:
        raise AssertionError(f"no free Redis database among {_REDIS_DATABASES} on {REDIS}: each holds keys")
    try:
        yield number
    finally:
        if client.get(_REDIS_OWNER_KEY) == me.encode():
            client.flushdb()  # this session's own database: the Celery queues and results it left
        client.close()


class AirflowServices:
    """Airflow's components for one deployment, and the REST API of its API server.

    ``kill_worker`` and ``start_worker`` replace the Celery worker, as a lost machine and its replacement would.
    """

    def __init__(self, deployment: Deployment, dags_folder: Path, redis_db: int) -> None:
        self.port = _free_port()
        self.deployment = deployment  # its catalog, for what a test reads back
        self.home = deployment.home
        self.env = {
            **deployment.env,
            **airflow_settings(
                api_server=f"127.0.0.1:{self.port}",
                redis=REDIS,
                metadata_db=deployment.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"],
                redis_database=redis_db,
            ),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            # Users who log in, as in docker/compose.yaml: the tests call the API as the admin, and the browser
            # tests open the pages as the viewer.
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": USERS,
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            # The DAG files do not change while the tests run: parsed once, not again every 30 s (Airflow's default,
            # which was a fifth of the whole suite's CPU: 13 files, two sets of services). A failure callback still
            # puts its file at the front of the queue at once.
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "3600",
            # Every run here is one a test triggers: a DAG's schedule (an example's @daily) adds none when unpaused.
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            # A task whose worker was lost (its heartbeats stop) is failed, and its failure callback run, after
            # 30 s rather than Airflow's five minutes: a live task's supervisor beats every few seconds.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "30",
            # The workers' and triggerer's log servers, on ports of this session's own.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
        }
        self._services: dict[str, subprocess.Popen[bytes]] = {}
        self._workers = 0
        self._token = ""

    def start(self) -> None:
        """Every component of ``as_deployed.AIRFLOW_COMPONENTS`` (the API server on this port, from the settings)."""
        for component in AIRFLOW_COMPONENTS:
            if component != _CELERY_WORKER:
                self._start(component[0], list(component))
        self.start_worker()
        wait_for("the API server, scheduler, DAG processor and triggerer", self._healthy, timeout=120)
        self._token = self.token("admin")

    def stop(self) -> None:
        for process in self._services.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self._services.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def start_worker(self) -> str:
        """Start a Celery worker (``celery-worker-<n>``, its log at ``<home>/celery-worker-<n>.log``) and wait until
        it takes tasks; its name."""
        self._workers += 1
        name = f"celery-worker-{self._workers}"
        command = [*_CELERY_WORKER, "--celery-hostname", f"{name}@%h", "--pid", str(self.home / f"{name}.pid")]
        self._start(name, command)
        wait_for(f"{name} to be ready", lambda: " ready." in self._log_of_running(name))
        return name

    def kill_worker(self) -> list[int]:
        """SIGKILL the running Celery worker's process group, every task process it started with it (not what
        they started in sessions of their own, such as Spark drivers), as a lost machine; the pids killed."""
        [name] = [name for name, process in self._services.items() if name.startswith("celery-worker-")]
        process = self._services.pop(name)
        group = [p.pid for p in _processes_in_group(process.pid)]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return group

    def password(self, user: str) -> str:
        return password(self.home, user)

    def token(self, user: str) -> str:
        return login(self.url("/auth/token"), self.home, user)

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        """The REST API's answer, as the admin unless another user's ``token`` is given."""
        request = urllib.request.Request(
            self.url(f"/api/v2{path}"),
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token or self._token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request) as response:
            body = response.read()
        return json.loads(body) if body else None

    def plugin(self, path: str) -> Any:
        """The monitoring plugin's JSON at ``path`` (under ``/spark-tables/api``), as this API server serves it."""
        request = urllib.request.Request(
            self.url(f"/spark-tables/api{path}"), headers={"Authorization": f"Bearer {self._token}"}
        )
        with urllib.request.urlopen(request) as response:
            return json.loads(response.read())

    def page(self, path: str) -> str:
        """The monitoring plugin's page at ``path`` (under ``/spark-tables``)."""
        request = urllib.request.Request(
            self.url(f"/spark-tables{path}"), headers={"Authorization": f"Bearer {self._token}"}
        )
        with urllib.request.urlopen(request) as response:
            return response.read().decode()

    def trigger(self, dag_id: str, conf: dict[str, Any], logical_date: str | None = None) -> str:
        wait_for(f"{dag_id} to be parsed", lambda: self._exists(f"/dags/{dag_id}"))
        self.api("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        body = {"logical_date": logical_date, "conf": conf}
        return self.api("POST", f"/dags/{dag_id}/dagRuns", body)["dag_run_id"]

    def finished(self, dag_id: str, run_id: str, timeout: float = 300) -> str:
        """The run's final state, once it has one."""
        ended = lambda: self.run_state(dag_id, run_id) in ("success", "failed")  # noqa: E731
        wait_for(f"{dag_id} to finish", ended, timeout=timeout)
        return self.run_state(dag_id, run_id)

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")

    def task_state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.task_instance(dag_id, run_id, task_id)["state"]

    def run_state(self, dag_id: str, run_id: str) -> str:
        return self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}")["state"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> str:
        path = self._task_logs(dag_id, run_id, task_id) / f"attempt={attempt}.log"
        return path.read_text() if path.exists() else ""

    def trigger_log(self, dag_id: str, run_id: str, task_id: str, attempt: int = 1) -> str:
        """What the triggers a task try deferred to logged in the triggerer, one after the other."""
        logs = sorted(self._task_logs(dag_id, run_id, task_id).glob(f"attempt={attempt}.log.trigger.*.log"))
        return "".join(log.read_text() for log in logs)

    def dag_processor_log(self, dag_file: str) -> str:
        """What the DAG processor logged while it processed ``dag_file`` (callbacks included)."""
        return "".join(
            log.read_text() for log in sorted((self.home / "logs" / "dag_processor").rglob(f"{dag_file}.log"))
        )

    def _task_logs(self, dag_id: str, run_id: str, task_id: str) -> Path:
        return self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        entry = self.api("GET", f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}")
        return entry["value"]

    def example_run(self, dag_id: str, run_id: str) -> ExampleRun:
        """A finished run: its tasks' return values (those that have one) and their logs, one after the other."""
        run = quote(run_id, safe="")
        tasks = self.api("GET", f"/dags/{dag_id}/dagRuns/{run}/taskInstances")["task_instances"]
        xcoms, logs = {}, []
        for task in sorted(tasks, key=lambda t: t["start_date"] or ""):
            entries = self.api("GET", f"/dags/{dag_id}/dagRuns/{run}/taskInstances/{task['task_id']}/xcomEntries")
            if any(entry["key"] == "return_value" for entry in entries["xcom_entries"]):
                xcoms[task["task_id"]] = self.xcom(dag_id, run_id, task["task_id"])
            logs.append(self.task_log(dag_id, run_id, task["task_id"]))
        return ExampleRun(self.deployment, xcoms, "\n".join(logs))

    def _start(self, name: str, command: list[str]) -> None:
        log = open(self.home / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        self._services[name] = subprocess.Popen(
            [str(VENV_BIN / "airflow"), *command],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _log_of_running(self, name: str) -> str:
        """The log of a service, which must still be running: one that exited fails the test with its log's end."""
        log = (self.home / f"{name}.log").read_text(errors="replace")
        if self._services[name].poll() is not None:
            raise AssertionError(f"{name} exited ({self._services[name].returncode}):\n{log[-3000:]}")
        return log

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _healthy(self) -> bool:
        for name in self._services:
            self._log_of_running(name)
        with contextlib.suppress(OSError):
            health = json.loads(urllib.request.urlopen(self.url("/api/v2/monitor/health")).read())
            components = ("scheduler", "dag_processor", "triggerer")
            return all(health[component]["status"] == "healthy" for component in components)
        return False

    def _exists(self, path: str) -> bool:
        with contextlib.suppress(OSError):
            self.api("GET", path)
            return True
        return False


def _processes_in_group(pgid: int) -> list[Any]:
    import psutil

    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(process.pid) == pgid:
                found.append(process)
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_airflow(deployment: Deployment, dags_folder: Path) -> Iterator[AirflowServices]:
    with redis_database() as redis_db:
        services = AirflowServices(deployment, dags_folder, redis_db)
        try:
            services.start()
            yield services
        finally:
            services.stop()
