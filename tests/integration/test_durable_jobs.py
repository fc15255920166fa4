"""Durable jobs as deployed: the scheduler, a Celery worker and a Spark standalone cluster; a task's worker is lost
while its driver runs (SIGKILL to the Celery worker's process group: the worker, its supervisors and task processes,
not the drivers in their own sessions), a new worker takes the retry, and the result is an undisturbed run's.

Each job waits at a gate the test holds closed (``dags/durable_scenarios.py``): the test kills while the driver
works, waits until the next try has found the driver, then opens the gate.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from spark_tables.core.names import flat_name
from spark_tables.utils.metastore_schema import ensure_metastore_schema
from tests.integration.airflow_services import AirflowServices, wait_for
from tests.integration.conftest import CLUSTER_METASTORE_DATABASE, PG_HOST, PG_PORT, PG_USER, Deployment

pytestmark = pytest.mark.integration

#: The gate's advisory lock: one per test session (xdist worker), as the gate reads a database they share.
GATE_KEY = zlib.crc32(os.environ.get("PYTEST_XDIST_WORKER", "gw").encode()) % 1_000_000
#: The gate's database: that of the lookup connection of ``cluster_airflow`` (advisory locks are per database).
GATE_DATABASE = CLUSTER_METASTORE_DATABASE


@contextlib.contextmanager
def closed_gate() -> Iterator[Any]:
    """Hold the gate's lock; ``opened()`` on what it yields releases it. Released at the end in any case."""
    conn = psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=GATE_DATABASE, autocommit=True)
    conn.execute("SELECT pg_advisory_lock(%s)", (GATE_KEY,))
    try:
        yield conn
    finally:
        conn.execute("SELECT pg_advisory_unlock_all()")
        conn.close()


def _waiting_at_gate(conn: Any) -> int:
    """How many jobs wait at the gate: a job waits on one connection at a time (its driver's or its executor's)."""
    query = "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted"
    return conn.execute(query, (GATE_KEY,)).fetchone()[0]


def _open(conn: Any) -> None:
    conn.execute("SELECT pg_advisory_unlock_all()")


class Deployed:
    """Airflow as deployed (``airflow_services``) whose Spark is the standalone cluster, and that cluster."""

    def __init__(self, services: AirflowServices, deployment: Deployment, cluster: Any) -> None:
        self.services, self.deployment, self.cluster = services, deployment, cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self.services, name)

    def read_back(self, sql: str) -> list[list[Any]]:
        return self.deployment.read_back(sql)


@pytest.fixture(scope="module")
def deployed(cluster_airflow: AirflowServices, spark_cluster: Any) -> Deployed:
    """The session's Airflow as deployed on the cluster (``cluster_airflow``), and the cluster."""
    return Deployed(cluster_airflow, cluster_airflow.deployment, spark_cluster)


def _applications(deployed: Deployed, name: str, since: float = 0.0) -> list[dict[str, Any]]:
    """The cluster's applications of this name, started at or after ``since`` (seconds since the epoch)."""
    return [app for app in deployed.cluster.applications() if app["name"] == name and app["starttime"] >= since * 1000]


def _lose_the_worker_while_the_drivers_work(deployed: Deployed, tasks: dict[str, tuple[str, str]]) -> None:
    """Kill the Celery worker once the drivers of ``tasks`` (run id and task id by DAG id) all wait at the gate, and
    start a new one for the retries."""
    with closed_gate() as gate:
        at_gate = lambda: _waiting_at_gate(gate) == len(tasks)  # noqa: E731
        wait_for(f"the drivers of {sorted(tasks)} at the gate", at_gate, timeout=300)
        deployed.kill_worker()
        deployed.start_worker()
        for dag_id, (run_id, task_id) in tasks.items():
            wait_for(
                f"{dag_id}.{task_id}'s second try to find the first try's driver",
                lambda: "Reconnecting to existing job" in deployed.task_log(dag_id, run_id, task_id, attempt=2),  # noqa: B023
                timeout=300,
            )
        _open(gate)
    for dag_id, (run_id, _) in tasks.items():
        assert deployed.finished(dag_id, run_id) == "success", dag_id


def _exchange_files(deployed: Deployed, dag_id: str) -> list[str]:
    exchange = Path(deployed.env["AIRFLOW__SPARK_TABLES__HOME"]) / "exchange"
    return sorted(path.name for path in exchange.glob(f"{dag_id}__*")) if exchange.exists() else []


def test_a_ctas_and_a_cached_table_producer_whose_worker_is_lost_are_finished_by_the_drivers_they_started(
    deployed: Deployed, gate_table: str
):
    """One Celery worker runs both tasks and is lost while both drivers work; the retries, on a new worker, take the
    drivers over: the CTAS table is complete and claimed once, the cached table's copy registered once."""
    table = "durable_lost_worker"
    since = time.time()
    ctas_run = deployed.trigger("durable_ctas", {"table": table})
    cache_run = deployed.trigger("durable_cache", {})

    _lose_the_worker_while_the_drivers_work(
        deployed, {"durable_ctas": (ctas_run, "ctas"), "durable_cache": (cache_run, "produce")}
    )

    assert deployed.task_instance("durable_ctas", ctas_run, "ctas")["try_number"] == 2
    assert len(_applications(deployed, "durable_ctas.ctas", since)) == 1, "the retry took the first driver over"
    value = deployed.xcom("durable_ctas", ctas_run, "ctas")
    assert (value["created"], value["rows"]) == (True, 100000)
    assert deployed.read_back(f"SELECT count(*), count(DISTINCT h) FROM {table}") == [[100000, 100000]]
    assert _exchange_files(deployed, "durable_ctas") == [], "claim, result, spec, log: all taken or removed"

    assert deployed.task_instance("durable_cache", cache_run, "produce")["try_number"] == 2
    assert len(_applications(deployed, "durable_cache.produce", since)) == 1
    produced = deployed.xcom("durable_cache", cache_run, "produce")
    consumed = deployed.xcom("durable_cache", cache_run, "consume")
    assert produced["rows"] == [[100, 200000]]
    assert produced["caches"]["durable_b"]["misses"] == 1
    assert consumed["caches"]["durable_b"]["hits"] == 1
    released = deployed.xcom("durable_cache", cache_run, "release_caches")
    assert len(released["released"]["durable_b"]) == 1, "one copy was registered, and released"


def test_a_full_lookup_reload_whose_worker_is_lost_publishes_one_snapshot(deployed: Deployed, gated_customers: str):
    since = time.time()
    run_id = deployed.trigger("durable_lookup_reload", {})

    _lose_the_worker_while_the_drivers_work(deployed, {"durable_lookup_reload": (run_id, "reload")})

    assert len(_applications(deployed, "durable_lookup_reload.reload", since)) == 1
    [lookup] = (Path(deployed.env["AIRFLOW__SPARK_TABLES__HOME"]) / "lookup").glob("durable_customers-*")
    snapshots = [path for path in lookup.iterdir() if path.is_dir()]
    assert len(snapshots) == 1, f"one snapshot published: {sorted(p.name for p in lookup.iterdir())}"
    reload = deployed.xcom("durable_lookup_reload", run_id, "reload")
    assert (reload["loaded"], reload["loads"], reload["snapshot"]["rows"]) == (True, 1, 1000)


def test_a_driver_lost_with_its_worker_is_undone_and_its_job_run_again(deployed: Deployed, gate_table: str):
    table = "durable_lost_driver"
    since = time.time()
    run_id = deployed.trigger("durable_ctas", {"table": table})

    with closed_gate() as gate:
        wait_for("the driver at the gate", lambda: _waiting_at_gate(gate), timeout=300)
        [driver] = [p for p in psutil.process_iter(["cmdline"]) if _drives(p, "durable_ctas")]
        group = os.getpgid(driver.pid)
        deployed.kill_worker()
        os.killpg(group, signal.SIGKILL)  # the driver dies with the machine
        deployed.start_worker()
        wait_for(
            "the second try to find the driver lost",
            lambda: "LOST" in deployed.task_log("durable_ctas", run_id, "ctas", attempt=2),
            timeout=300,
        )
        _open(gate)
    assert deployed.finished("durable_ctas", run_id) == "success"

    assert len(_applications(deployed, "durable_ctas.ctas", since)) == 3, "the lost one, the cleanup, the new one"
    assert deployed.read_back(f"SELECT count(*) FROM {table}") == [[100000]]
    assert _exchange_files(deployed, "durable_ctas") == []


def test_marking_a_durable_task_failed_still_stops_its_driver_which_undoes_its_table(
    deployed: Deployed, gate_table: str
):
    """The driver undoes its table. The task process may be killed (5 s after the mark) before it takes the
    driver's result: then its claim, result and files wait for the next CTAS on the catalog, which sweeps them."""
    table = "durable_marked_failed"
    since = time.time()
    run_id = deployed.trigger("durable_ctas", {"table": table})

    with closed_gate() as gate:
        wait_for("the driver at the gate", lambda: _waiting_at_gate(gate), timeout=300)
        deployed.api("PATCH", f"/dags/durable_ctas/dagRuns/{run_id}/taskInstances/ctas", {"new_state": "failed"})
        assert deployed.finished("durable_ctas", run_id) == "failed"
        wait_for(
            "the driver to end",
            lambda: (
                not [app for app in _applications(deployed, "durable_ctas.ctas", since) if app["state"] == "RUNNING"]
            ),
        )
    assert deployed.read_back(f"SHOW TABLES LIKE '{table}'") == []

    next_run = deployed.trigger("durable_ctas", {"table": "durable_after_marked_failed"})  # the gate is open
    assert deployed.finished("durable_ctas", next_run) == "success"
    marked = flat_name(["durable_ctas", run_id]).rsplit("__", 1)[0]  # how the exchange's files name the run
    assert not [name for name in _exchange_files(deployed, "durable_ctas") if name.startswith(marked)]


def test_a_spark_worker_lost_under_a_cached_table_consumer_is_replaced_by_spark_and_the_task_succeeds(
    deployed: Deployed, gate_table: str
):
    since = time.time()
    run_id = deployed.trigger("durable_cache_consumer", {})

    with closed_gate() as gate:
        wait_for("the consumer at the gate", lambda: _waiting_at_gate(gate), timeout=300)
        [app] = [app for app in _applications(deployed, "durable_cache_consumer.consume", since)]
        [worker] = [e["worker"] for e in deployed.cluster.executors(app["id"]) if not e["finished"]]
        deployed.cluster.kill_worker(worker)
        try:
            wait_for(
                "Spark to give the application an executor on the other worker, which waits at the gate again",
                lambda: (
                    any(e["worker"] != worker for e in deployed.cluster.executors(app["id"])) and _waiting_at_gate(gate)
                ),
                timeout=300,
            )
            _open(gate)
            assert deployed.finished("durable_cache_consumer", run_id) == "success"
        finally:
            deployed.cluster.restart_worker(worker)

    assert deployed.task_instance("durable_cache_consumer", run_id, "consume")["try_number"] == 1, "no Airflow retry"
    consumed = deployed.xcom("durable_cache_consumer", run_id, "consume")
    assert consumed["rows"] == [[100, 100]]
    assert consumed["caches"]["durable_c"]["hits"] == 1, "the copy was read, on the new executor"


def _drives(process: psutil.Process, dag_id: str) -> bool:
    command = " ".join(process.info["cmdline"] or [])
    return "SparkSubmit" in command and dag_id in command


@pytest.fixture(scope="module")
def gate_table(deployed: Deployed) -> str:
    """The gate in the catalog: a JDBC table whose read takes the gate's lock shared."""
    ensure_metastore_schema(deployed.deployment.catalog)  # before any task has made it
    url = f"jdbc:postgresql://{PG_HOST}:{PG_PORT}/{GATE_DATABASE}?user={PG_USER}"
    query = f"SELECT pg_advisory_lock_shared({GATE_KEY}) IS NOT NULL AS opened"
    deployed.read_back(
        f"CREATE TABLE IF NOT EXISTS durable_gate USING jdbc OPTIONS "
        f"(url '{url}', driver 'org.postgresql.Driver', query '{query}')"
    )
    return "durable_gate"


@pytest.fixture(scope="module")
def gated_customers() -> str:
    """The lookup table: 1,000 customers behind a PostgreSQL view that waits at the gate."""
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=GATE_DATABASE, autocommit=True) as db:
        db.execute("CREATE SCHEMA IF NOT EXISTS spark_tables_demo")
        db.execute("DROP VIEW IF EXISTS spark_tables_demo.durable_customers")
        db.execute("DROP TABLE IF EXISTS spark_tables_demo.durable_customers_data")
        db.execute(
            "CREATE TABLE spark_tables_demo.durable_customers_data AS "
            "SELECT g AS customer_id, 'customer ' || g AS name FROM generate_series(1, 1000) g"
        )
        db.execute(
            "CREATE VIEW spark_tables_demo.durable_customers AS SELECT c.* "
            "FROM spark_tables_demo.durable_customers_data c "
            f"CROSS JOIN (SELECT pg_advisory_lock_shared({GATE_KEY}) AS opened) AS gate"
        )
    return json.dumps({"table": "spark_tables_demo.durable_customers"})
