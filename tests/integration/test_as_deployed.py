"""The example DAGs under Airflow as deployed (API server, scheduler, DAG processor, triggerer, a Celery worker;
PostgreSQL metadata DB, Redis broker), triggered through the REST API as a user would: their results, the run tabs
of the monitoring plugin reading them, a lookup reload sensor waiting in the triggerer, and a CTAS whose Celery
worker was lost, cleaned up by its failure callback."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pandas as pd
import psutil
import pytest

from spark_tables.core.catalog_config import PostgresMetastore
from tests.integration.airflow_services import AirflowServices, wait_for
from tests.integration.conftest import Deployment
from tests.integration.ctas_checks import assert_gone, metastore_tables, spark_processes

pytestmark = pytest.mark.integration

#: The CTAS example's day (it is @daily: its tables are named after the run's logical date).
DS = "2026-11-20"


def _run_tab(airflow: AirflowServices, dag_id: str, run_id: str) -> dict:
    return airflow.plugin(f"/dags/{dag_id}/runs/{quote(run_id, safe='')}")


@pytest.fixture(scope="module")
def examples(airflow: AirflowServices) -> dict[str, str]:
    """The cache, CTAS and lookup examples, triggered at once and finished: their run ids."""
    runs = {
        "example_spark_cache": airflow.trigger("example_spark_cache", {}),
        "example_spark_ctas": airflow.trigger("example_spark_ctas", {}, logical_date=f"{DS}T00:00:00Z"),
        "example_spark_lookup": airflow.trigger("example_spark_lookup", {}),
    }
    assert {dag_id: airflow.finished(dag_id, run_id, timeout=900) for dag_id, run_id in runs.items()} == dict.fromkeys(
        runs, "success"
    )
    return runs


def test_the_example_dags_run_as_triggered_through_the_rest_api(
    airflow: AirflowServices, postgres: Deployment, examples: dict[str, str]
):
    """The cache, CTAS and lookup examples triggered at once: each succeeds with its results, b computed once
    though ``max_b`` and ``min_b`` run in parallel, and each run's Spark tables tab shows what it did."""
    runs = examples
    run_id = runs["example_spark_cache"]
    xcom = lambda task: airflow.xcom("example_spark_cache", run_id, task)  # noqa: E731
    assert xcom("count_b")["rows"] == [[20000, 2000000]]
    assert len(xcom("normalise_b")["rows"]) == 5
    uses = {task: xcom(task)["caches"]["b"] for task in ("max_b", "min_b", "normalise_b", "count_b")}
    [writer] = [task for task, use in uses.items() if use["status"] == "miss"]
    assert writer in ("max_b", "min_b") and {u["location"] for u in uses.values()} == {uses[writer]["location"]}
    assert (xcom("release_caches")["usage"]["b"]["misses"], xcom("release_caches")["usage"]["b"]["hits"]) == (1, 3)
    [cache] = _run_tab(airflow, "example_spark_cache", run_id)["caches"]
    [copy] = cache["copies"]
    assert (copy["written_by"], copy["state"], copy["rows"]) == (writer, "released", 20000)
    assert sorted(e["task_id"] for e in copy["events"] if e["event"] == "read") == sorted(set(uses) - {writer})

    run_id = runs["example_spark_ctas"]
    snapshot = airflow.xcom("example_spark_ctas", run_id, "snapshot_orders")
    totals = airflow.xcom("example_spark_ctas", run_id, "publish_customer_totals")
    assert (snapshot["table"], snapshot["created"], snapshot["rows"]) == ("order_snapshot_20261120", True, 100000)
    assert (totals["table"], totals["rows"]) == ("customer_totals", 7)
    tables = metastore_tables(postgres)
    assert tables["order_snapshot_20261120"]["spark_tables.ctas.state"] == "complete"
    tab = _run_tab(airflow, "example_spark_ctas", run_id)
    assert sorted((t["task_id"], t["table"], t["created"]) for t in tab["ctas"]) == [
        ("publish_customer_totals", "customer_totals", True),
        ("snapshot_orders", "order_snapshot_20261120", True),
    ]

    run_id = runs["example_spark_lookup"]
    reload = airflow.xcom("example_spark_lookup", run_id, "reload")
    assert reload["snapshot"]["rows"] == 1000
    assert reload["snapshot"]["scheduled_for"] == airflow.xcom("example_spark_lookup", run_id, "wait_for_reload")
    assert isinstance(postgres.catalog, PostgresMetastore)
    warehouse = Path(postgres.catalog.warehouse)
    enriched = {
        cache: pd.read_parquet(warehouse / f"orders_enriched_{cache}").sort_values("order_id", ignore_index=True)
        for cache in ("none", "partial", "full")
    }
    assert len(enriched["none"]) == 20000
    pd.testing.assert_frame_equal(enriched["none"], enriched["partial"])
    pd.testing.assert_frame_equal(enriched["none"], enriched["full"])
    tab = _run_tab(airflow, "example_spark_lookup", run_id)
    assert sorted((lookup["task_id"], lookup["kind"]) for lookup in tab["lookups"]) == [
        ("enrich_full", "join"),
        ("enrich_none", "join"),
        ("enrich_partial", "join"),
        ("reload", "reload"),
    ]
    page = airflow.page(f"/dags/example_spark_lookup/runs/{quote(run_id, safe='')}")
    assert "demo_customers" in page

    overview = airflow.plugin("/overview?days=1")
    assert ("example_spark_cache", "b") in {(table["dag_id"], table["name"]) for table in overview["caches"]}
    assert "demo_customers" in {table["name"] for table in overview["lookups"]}


def test_the_reload_sensor_waits_in_the_triggerer(airflow: AirflowServices, examples: dict[str, str]):
    """A first reload of the customers the lookup example seeded, then a second run whose sensor defers until the
    reload is due (20 s after the first load ended): the task instance is seen deferred, the trigger fires in the
    triggerer and the sensor resumes."""
    first = airflow.trigger("lookup_reload_deferred", {})
    assert airflow.finished("lookup_reload_deferred", first) == "success"

    second = airflow.trigger("lookup_reload_deferred", {})
    deferred = lambda: airflow.task_state("lookup_reload_deferred", second, "wait_for_reload") == "deferred"  # noqa: E731
    wait_for("the sensor to defer", deferred)
    assert airflow.finished("lookup_reload_deferred", second) == "success"

    log = airflow.task_log("lookup_reload_deferred", second, "wait_for_reload")
    assert "is due at" in log and ": deferring" in log, "it deferred, with the due time"
    due = airflow.xcom("lookup_reload_deferred", second, "wait_for_reload")
    assert f"the reload of lookup table deferred_customers is due ({due})" in log, "it resumed from the trigger"
    triggered = airflow.trigger_log("lookup_reload_deferred", second, "wait_for_reload")
    assert "DateTimeTrigger" in triggered and "Trigger fired event" in triggered, "the triggerer ran its trigger"
    assert airflow.xcom("lookup_reload_deferred", second, "reload")["snapshot"]["scheduled_for"] == due
    assert airflow.task_instance("lookup_reload_deferred", second, "wait_for_reload")["try_number"] == 1


def test_a_ctas_whose_worker_was_lost_is_cleaned_up_by_its_failure_callback(
    airflow: AirflowServices, postgres: Deployment
):
    """The Celery worker running a CTAS is SIGKILLed with the job's driver, as a machine lost: nothing in the task
    can clean up. Airflow finds the task's heartbeats gone and fails it; its failure callback, run by the DAG
    processor, runs the cleanup job, which drops the table. A new worker takes the next tasks."""
    table = "lost_with_its_worker"
    run_id = airflow.trigger("ctas_endless", {"table": table})
    created = lambda: f"created {table}, owned by" in airflow.task_log("ctas_endless", run_id, "ctas")  # noqa: E731
    wait_for("the table's creation", created)
    spark = spark_processes(table)
    assert spark and table in metastore_tables(postgres)

    killed = airflow.kill_worker()
    for process in spark:
        process.kill()
    psutil.wait_procs(spark, timeout=30)
    assert len(killed) > 1, "the worker's group held its task processes too"
    airflow.start_worker()

    wait_for("the lost task to fail", lambda: airflow.task_state("ctas_endless", run_id, "ctas") == "failed")
    claims = lambda: list((airflow.home / "spark_tables" / "exchange").glob("ctas_endless__*.claim.json"))  # noqa: E731
    wait_for("the failure callback's cleanup job to release the claim", lambda: not claims(), timeout=300)
    assert_gone(postgres, table)
    assert f"cleanup job for {table}" in airflow.dag_processor_log("ctas_scenarios.py"), "the failure callback's"
