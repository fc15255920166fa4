"""Lookup joins through `airflow dags test` on the embedded default, against a real PostgreSQL dimension table:
the example DAG (reload, then NONE, PARTIAL and FULL joins of the same orders), and a reload whose sensor defers."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

import pandas as pd
import pendulum
import pytest

from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, SCENARIOS, Deployment

pytestmark = pytest.mark.integration

CONN = f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/spark_tables_test"


@pytest.fixture(scope="module")
def lookups(embedded: Deployment) -> Deployment:
    return dataclasses.replace(embedded, env={**embedded.env, "AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO": CONN})


@pytest.fixture(scope="module")
def example_run(lookups: Deployment) -> str:
    """One run of the example DAG (which also seeds the dimension table the scenarios read)."""
    return _run(lookups, "example_spark_lookup")[0]


def _run(deployment: Deployment, dag_id: str) -> tuple[str, str]:
    done = deployment.airflow("dags", "test", dag_id)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        run_id = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (dag_id,)).fetchone()[0]
    return run_id, done.stdout + done.stderr


def _xcoms(deployment: Deployment, dag_id: str, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = 'return_value'",
            (dag_id, run_id),
        ).fetchall()
    return {task: json.loads(value) for task, value in rows}


def test_example_dag_enriches_the_same_rows_through_every_cache(lookups: Deployment, example_run: str) -> None:
    xcoms = _xcoms(lookups, "example_spark_lookup", example_run)

    reload = xcoms["reload"]
    assert reload["snapshot"]["rows"] == 1000 and reload["snapshot"]["scheduled_for"] == xcoms["wait_for_reload"]
    warehouse = lookups.home / "spark_tables" / "warehouse"
    tables = {
        cache: pd.read_parquet(warehouse / f"orders_enriched_{cache}").sort_values("order_id", ignore_index=True)
        for cache in ("none", "partial", "full")
    }
    assert len(tables["none"]) == 20000 and tables["none"]["name"].isna().sum() > 0  # left join: misses kept
    pd.testing.assert_frame_equal(tables["none"], tables["partial"])
    pd.testing.assert_frame_equal(tables["none"], tables["full"])

    none, partial, full = (xcoms[f"enrich_{cache}"]["metrics"] for cache in ("none", "partial", "full"))
    assert none["loadCount"] == 20000  # a query per order
    assert partial["loadCount"] == partial["missCount"] and partial["hitCount"] > partial["missCount"]
    assert partial["hitCount"] + partial["missCount"] == 20000
    assert full["loadCount"] == 1 and full["numCachedRecords"] == 1000  # the snapshot's one load, no per-key query
    assert full["hitCount"] == 20000 and full["missCount"] == 0  # a full cache answers every key (Flink's meaning)
    assert full["unmatchedCount"] == int(tables["full"]["name"].isna().sum())
    assert xcoms["enrich_full"]["snapshot"] == reload["snapshot"]["version"]


def test_the_reload_sensor_defers_until_the_reload_is_due(lookups: Deployment, example_run: str) -> None:
    scenarios = lookups.with_dags(SCENARIOS)
    first_run, _ = _run(scenarios, "lookup_reload_every_20s")
    second_run, log = _run(scenarios, "lookup_reload_every_20s")

    first = _xcoms(scenarios, "lookup_reload_every_20s", first_run)["reload"]["snapshot"]
    second_xcoms = _xcoms(scenarios, "lookup_reload_every_20s", second_run)
    due = pendulum.parse(second_xcoms["wait_for_reload"])
    assert "deferring" in log  # the second run's sensor waited in the trigger, not in a worker slot
    assert due == pendulum.parse(first["finished"]).add(seconds=20)  # FIXED_DELAY: from the end of the last load
    second = second_xcoms["reload"]["snapshot"]
    assert pendulum.parse(second["started"]) >= due
    assert second["scheduled_for"] == second_xcoms["wait_for_reload"] and second["loads"] == 2
