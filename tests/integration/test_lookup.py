"""Lookup joins through `airflow dags test` in session mode (the tests' Spark Connect server), against a real
PostgreSQL dimension table: the example DAG (reload, then NONE, PARTIAL and FULL joins of the same orders), and turns
of a reload DAG whose sensor defers until the reload is due and backs off after failed loads. Per job, the example
runs on the standalone cluster (``test_cluster.py``) and the README's lookup join on the embedded default
(``test_readme_snippets.py``): a lookup's job is the same in both modes, its code shipped to the session here."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pendulum
import psycopg
import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog, PostgresMetastore
from spark_tables.core.lookup.snapshot import POINTER
from tests.integration.conftest import (
    PG_HOST,
    PG_PORT,
    PG_USER,
    SCENARIOS,
    Deployment,
    ExampleRun,
    demo_connection,
)
from tests.integration.test_plan import DATABASE

pytestmark = pytest.mark.integration

#: The reload scenario's table: a copy of the example's customers, made and dropped by the test.
SCENARIO_TABLE = "spark_tables_demo.scenario_customers"


def with_lookup_connection(deployment: Deployment, database: str) -> Deployment:
    """``deployment`` with the example's connection on ``database``, where the example seeds its dimension table."""
    connection = demo_connection(database)
    return dataclasses.replace(deployment, env={**deployment.env, "AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO": connection})


@pytest.fixture(scope="module")
def lookups(in_session: Deployment) -> Deployment:
    return with_lookup_connection(in_session, DATABASE)


@pytest.fixture(scope="module")
def example_run(lookups: Deployment) -> tuple[str, str]:
    """One run of the example DAG (which also seeds the dimension table the scenarios read): its id and log."""
    return _run(lookups, "example_spark_lookup")


def _run(deployment: Deployment, dag_id: str, succeeds: bool = True) -> tuple[str, str]:
    done = deployment.airflow("dags", "test", dag_id)
    assert (done.returncode == 0) == succeeds, done.stdout[-6000:] + done.stderr[-3000:]
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        run_id = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (dag_id,)).fetchone()[0]
    return run_id, done.stdout + done.stderr


def _execute(statement: str) -> None:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname="spark_tables_test", user=PG_USER, autocommit=True) as db:
        db.execute(statement)


def _pointer(deployment: Deployment) -> dict[str, Any]:
    """The scenario table's snapshot pointer, as the reloads left it."""
    [snapshots] = (deployment.home / "spark_tables" / "lookup").glob("scenario_customers-*")
    return json.loads((snapshots / POINTER).read_text())


def _xcoms(deployment: Deployment, dag_id: str, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = 'return_value'",
            (dag_id, run_id),
        ).fetchall()
    return {task: json.loads(value) for task, value in rows}


def test_example_dag_enriches_the_same_rows_through_every_cache(
    lookups: Deployment, example_run: tuple[str, str]
) -> None:
    """On the server, whose workers run the lookups from the code each task ships."""
    run_id, log = example_run
    run = ExampleRun(lookups, _xcoms(lookups, "example_spark_lookup", run_id), log)
    check_example_lookup(run)
    jobs = ("reload", "enrich_none", "enrich_partial", "enrich_full", "review_segments", "reload_segments")
    jobs += ("enrich_segments",)  # check_segments found the Delta table unchanged: no job
    assert {run.xcoms[task]["mode"] for task in jobs} == {"session"}
    assert run.log.count("shipped the job's code to the session") == len(jobs)


def check_example_lookup(run: ExampleRun) -> None:
    """What the example's run did."""
    xcoms = run.xcoms

    reload = xcoms["reload"]
    assert reload["snapshot"]["rows"] == 1000 and reload["snapshot"]["scheduled_for"] == xcoms["wait_for_reload"]
    assert isinstance(run.deployment.catalog, EmbeddedCatalog | PostgresMetastore)
    warehouse = Path(run.deployment.catalog.warehouse)
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

    # The Delta dimension table: the MERGE made a version, which the reload copied, the join read, and the reload
    # after it found unchanged, without a Spark job
    segments = xcoms["reload_segments"]
    held = segments["snapshot"]["table_version"]
    assert (segments["loaded"], held["format"]) == (True, "delta") and held["number"] >= 1, "created, then merged"
    joined = xcoms["enrich_segments"]
    assert (joined["cache"], joined["table_version"], joined["rows"]) == ("FULL", held, 20000)
    check = xcoms["check_segments"]
    assert (check["loaded"], check["unchanged"], check["application_id"]) == (False, True, None)
    assert check["snapshot"] == segments["snapshot"]
    discounted = pd.read_parquet(warehouse / "orders_discounted")
    discounts = {"retail": 0.0, "wholesale": 0.12, "online": 0.05}
    known = discounted["segment"].notna()
    assert (
        len(discounted) == 20000
        and (discounted.loc[known, "discount"] == discounted.loc[known, "segment"].map(discounts)).all()
    )
    assert discounted.loc[~known, "discount"].isna().all(), "orders of customers the table lacks: no segment"


def test_the_reload_sensor_defers_until_due_and_backs_off_after_failed_loads(
    lookups: Deployment, example_run: tuple[str, str]
) -> None:
    """Turns of the reload DAG: a first load; a reload that waits for its time, then fails (the table is gone);
    another that waits the backoff after that failure, not the interval's, and fails too. The first snapshot
    stays in use throughout."""
    scenarios = lookups.with_dags(SCENARIOS)
    _execute(f"CREATE TABLE {SCENARIO_TABLE} AS SELECT * FROM spark_tables_demo.customers")
    try:
        first_run, _ = _run(scenarios, "lookup_reload_scenario")
    finally:
        _execute(f"DROP TABLE {SCENARIO_TABLE}")
    second_run, _ = _run(scenarios, "lookup_reload_scenario", succeeds=False)
    after_second = _pointer(scenarios)
    third_run, third_log = _run(scenarios, "lookup_reload_scenario", succeeds=False)
    after_third = _pointer(scenarios)

    first = _xcoms(scenarios, "lookup_reload_scenario", first_run)["reload"]
    assert first["loaded"] and first["snapshot"]["rows"] == 1000
    second_due = pendulum.parse(_xcoms(scenarios, "lookup_reload_scenario", second_run)["wait_for_reload"])
    assert second_due == pendulum.parse(first["snapshot"]["finished"]).add(seconds=20)  # FIXED_DELAY: from the end
    assert pendulum.parse(after_second["failing"]["started"]) >= second_due  # the sensor waited for it
    assert after_second["failing"]["count"] == 1 and "scenario_customers" in after_second["failing"]["error"]

    # after the failure the next attempt waits the 15 s backoff from it: not the 20 s interval, and not 0 s
    third_due = pendulum.parse(_xcoms(scenarios, "lookup_reload_scenario", third_run)["wait_for_reload"])
    assert third_due == pendulum.parse(after_second["failing"]["finished"]).add(seconds=15)
    assert "1 load(s) failed in a row" in third_log and "backing off" in third_log
    assert pendulum.parse(after_third["failing"]["started"]) >= third_due
    assert after_third["failing"]["count"] == 2 and after_third["load_failures"] == 2

    # the first snapshot is still the one served, whole
    assert after_third["current"] == first["snapshot"] and after_third["loads"] == 1
    assert len(pd.read_parquet(first["snapshot"]["location"].removeprefix("file://"))) == 1000
