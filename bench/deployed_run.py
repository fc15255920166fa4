"""FLIP-36's program as deployed: the cache example's whole DAG run by the scheduler and a Celery worker on a Spark
standalone cluster, against the same DAG run by ``airflow dags test`` on local Spark, both sides in this one process
run, rounds alternating.

As deployed: the services of the integration tests (``tests/integration/airflow_services.py``: API server,
scheduler, DAG processor, triggerer, one Celery worker; PostgreSQL metadata DB, Redis broker) and their cluster
(``tests/integration/spark_cluster.py``: a master and two 1-core 1 GiB workers on loopback), the provider's home
on a folder all of them see, a PostgreSQL metastore; the run is triggered through the REST API. Local: ``airflow
dags test`` (tasks in one process, one after another) on ``local[*]``, on a PostgreSQL metastore of its own.

Reported per side: the run's wall time; per task, its time in the queue (queued to started, as Airflow records it),
its run time, and inside it the Spark session's start and the job's work (the job's ``session_seconds`` and
``work_seconds``); and how many times each run computed b (its consumers' cache misses: one, with single flight).
No target: this is the baseline for session mode (issue 28).

Usage::

    .venv/bin/python bench/deployed_run.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import reproduce_command

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.integration.airflow_services import running_airflow  # noqa: E402
from tests.integration.conftest import Deployment, _empty_database, postgres_deployment  # noqa: E402
from tests.integration.spark_cluster import running_spark_cluster  # noqa: E402

DAG_ID = "example_spark_cache"
TASKS = ("make_a", "max_b", "min_b", "normalise_b", "count_b", "release_caches")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side, alternating (default 2)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    from datetime import datetime

    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def run_deployed(services: Any) -> dict[str, Any]:
    started = time.monotonic()
    run_id = services.trigger(DAG_ID, {})
    state = services.finished(DAG_ID, run_id, timeout=1800)
    wall = time.monotonic() - started
    if state != "success":
        raise SystemExit(f"as deployed: the run ended {state}")
    tasks = {}
    misses = 0
    for task_id in TASKS:
        ti = services.task_instance(DAG_ID, run_id, task_id)
        value = services.xcom(DAG_ID, run_id, task_id) if task_id != "release_caches" else {}
        misses += _misses(value)
        tasks[task_id] = {
            "queued": _seconds(ti.get("queued_when"), ti.get("start_date")),
            "run": _seconds(ti.get("start_date"), ti.get("end_date")),
            "session": (value or {}).get("session_seconds"),
            "work": (value or {}).get("work_seconds"),
        }
    return {"wall": wall, "tasks": tasks, "misses": misses}


def run_local(deployment: Deployment) -> dict[str, Any]:
    started = time.monotonic()
    done = deployment.airflow("dags", "test", DAG_ID)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"dags test failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        [run_id] = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (DAG_ID,)).fetchone()
        rows = db.execute(
            "SELECT task_id, queued_dttm, start_date, end_date FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (DAG_ID, run_id),
        ).fetchall()
        values = dict(
            db.execute(
                "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = 'return_value'",
                (DAG_ID, run_id),
            ).fetchall()
        )
    tasks = {}
    misses = 0
    for task_id, queued, start, end in rows:
        value = json.loads(values[task_id]) if task_id in values else {}
        misses += _misses(value)
        tasks[task_id] = {
            "queued": _seconds(_iso(queued), _iso(start)),
            "run": _seconds(_iso(start), _iso(end)),
            "session": value.get("session_seconds"),
            "work": value.get("work_seconds"),
        }
    return {"wall": wall, "tasks": tasks, "misses": misses}


def _misses(value: dict[str, Any] | None) -> int:
    """How many cached tables a task's return value says it computed (a miss: no copy to read)."""
    caches = (value or {}).get("caches") or {}
    return sum(1 for cache in caches.values() if cache.get("status") == "miss")


def _iso(value: str | None) -> str | None:
    return value.replace(" ", "T") if value else None


def _median(values: list[float | None]) -> str:
    present = [value for value in values if value is not None]
    return f"{statistics.median(present):7.1f}" if present else "      -"


def report(results: dict[str, list[dict[str, Any]]]) -> None:
    for side, runs in results.items():
        walls = [run["wall"] for run in runs]
        print(f"\n{side}: whole run {statistics.median(walls):.1f} s (median of {len(walls)}: {walls})")
        print(f"  b computed (cache misses) in each run: {[run['misses'] for run in runs]}")
        print(f"  {'task':<15}{'queued':>8}{'run':>8}{'session':>8}{'work':>8}   (s, medians)")
        for task_id in TASKS:
            cells = [_median([run["tasks"].get(task_id, {}).get(key) for run in runs]) for key in ("queued", "run")]
            cells += [_median([run["tasks"].get(task_id, {}).get(key) for run in runs]) for key in ("session", "work")]
            print(f"  {task_id:<15}{''.join(cells)}")
    deployed, local = (statistics.median(run["wall"] for run in results[side]) for side in results)
    print(f"\nas deployed / local: {deployed / local:.2f}x the whole run's wall time")


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = Path(tempfile.mkdtemp(prefix="spark_tables_deployed_", dir="/tmp"))
    shared = root / "shared"  # the folder every Airflow and Spark process sees, as an NFS mount would be
    (root / "cluster").mkdir()
    with running_spark_cluster(root / "cluster") as cluster:
        cluster_home = root / "deployed"
        cluster_home.mkdir()
        deployed = postgres_deployment(
            cluster_home,
            _empty_database("spark_tables_bench_cluster"),
            shared / "warehouse",
            "spark_tables_bench_airflow",
        )
        connection = {
            "conn_type": "spark",
            "host": cluster.master_url,
            "extra": {"deploy-mode": "client", "master-ui-url": cluster.ui_url},
        }
        env = {
            **deployed.env,
            "AIRFLOW__SPARK_TABLES__HOME": str(shared),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(connection),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        deployed = Deployment(home=cluster_home, catalog=deployed.catalog, env=env)
        local_home = root / "local"
        local_home.mkdir()
        local = postgres_deployment(local_home, _empty_database("spark_tables_bench_local"), local_home / "warehouse")
        names = {"deployed": "as deployed (scheduler, Celery, cluster)", "local": "dags test, local"}
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in names.values()}
        with running_airflow(deployed, REPO / "dags") as services:
            for number in range(args.rounds):
                sides = ["deployed", "local"] if number % 2 == 0 else ["local", "deployed"]
                for side in sides:
                    outcome = run_deployed(services) if side == "deployed" else run_local(local)
                    results[names[side]].append(outcome)
                    wall, misses = outcome["wall"], outcome["misses"]
                    print(f"round {number + 1}, {side}: {wall:.1f} s, {misses} miss(es)", flush=True)
    print(f"\nmachine: {os.cpu_count()} cores; load average at the end {os.getloadavg()}")
    report(results)
    print(f"\nreproduce: {command}")


if __name__ == "__main__":
    main(sys.argv[1:])
