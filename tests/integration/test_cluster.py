"""Every example DAG on a Spark standalone cluster: a master and two workers on loopback, a PostgreSQL metastore, and
``[spark_tables] home`` (warehouse, cache root, lookup root, checkpoints, exchange) on a folder every worker sees.
Five as deployed, the scheduler and a Celery worker (``cluster_airflow``) running their tasks in session mode:
``spark_default`` is a Spark Connect server whose application runs on the cluster (``cluster_session``), and they
are triggered at once through the REST API as a user would. The buffered-output example per job (its memory buffer
is refused in session mode), its drivers on the master in client deploy mode. Each is checked as on local Spark, by
the same checks; each application ran its executors in the workers' JVMs, not the driver's. The runs' Spark tables
tabs and the overview show what they did. A job per job on a catalog that loads Delta Lake (as docker/compose.yaml's
does). Then what the cluster refuses, per job: a root the executors do not share,
a master that cannot be reached, cluster deploy mode. (Per job on the cluster as deployed: ``test_durable_jobs.py``.)"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.tasks.sql_reader import read_statements
from spark_tables.utils.metastore_schema import ensure_metastore_schema
from tests import s3
from tests.integration.airflow_services import AirflowServices, _free_port
from tests.integration.conftest import (
    CLUSTER_BUFFERED_DS,
    CLUSTER_CTAS_DS,
    CLUSTER_METASTORE_DATABASE,
    SCENARIOS,
    Deployment,
    ExampleRun,
    _empty_database,
    postgres_deployment,
)
from tests.integration.ctas_checks import metastore_tables
from tests.integration.spark_cluster import SparkCluster
from tests.integration.spark_connect_server import SparkConnectServer
from tests.integration.test_buffered_output import check_example_buffered_output
from tests.integration.test_ctas import check_example_ctas
from tests.integration.test_example_dag import check_example_sql
from tests.integration.test_kafka_plans import check_kafka_scenario
from tests.integration.test_lookup import check_example_lookup
from tests.integration.test_object_storage import check_s3_scenario, on_s3
from tests.integration.test_plan import check_example_plan

pytestmark = pytest.mark.integration

#: The examples' PostgreSQL tables (lookup dimension, plan and aggregation sinks): in the cluster's metastore
#: database, beside the metastore's own tables, so no local test's tables meet them (``cluster_airflow``'s
#: connections).
DATABASE = CLUSTER_METASTORE_DATABASE


#: Tasks whose applications do all their work in the driver (the plan example's compile and explain analyse
#: queries and write or read a plan file): one may end before a worker has started its executor, so only its master
#: is checked.
DRIVER_ONLY = frozenset({"compile", "explain"})


#: The example that runs per job on the cluster; the others run in session mode on its Spark Connect server.
PER_JOB = "example_spark_buffered_output"


def ran_on_the_workers(cluster: SparkCluster, xcoms: dict[str, Any], master: str) -> list[str]:
    """Check that each Spark task of a run ran on ``master`` (the cluster's, per job, or its Spark Connect server's, in
    session mode), and each that runs Spark tasks ran them with executors the workers started; the applications'
    ids."""
    jobs = {
        task: x
        for task, x in xcoms.items()
        if isinstance(x, dict) and "application_id" in x and not x.get("unchanged")  # a reload with no job to run
    }
    assert jobs, "the run has no Spark job"
    assert jobs.keys() - DRIVER_ONLY, "the run has no Spark job with executors"
    mode = "per-job" if master == cluster.master_url else "session"
    for task, x in jobs.items():
        assert (x["master"], x["mode"]) == (master, mode), task
        if task in DRIVER_ONLY:
            continue
        executors = cluster.executors(x["application_id"])
        assert executors, f"{task}: application {x['application_id']} had no executor on a worker"
    return [x["application_id"] for x in jobs.values()]


#: Each example's checks on local Spark (its own test file's), but the cache example's, checked below.
CHECKS: dict[str, Callable[[ExampleRun], None]] = {
    "example_spark_sql": check_example_sql,
    "example_spark_ctas": check_example_ctas,
    "example_spark_lookup": check_example_lookup,
    "example_spark_plan": lambda run: check_example_plan(run, DATABASE),
    "example_spark_buffered_output": lambda run: check_example_buffered_output(run, DATABASE, CLUSTER_BUFFERED_DS),
}


@pytest.mark.parametrize("dag_id", sorted(CHECKS))
def test_the_example_does_what_it_does_on_local_spark(
    cluster_examples: dict[str, tuple[str, ExampleRun]],
    spark_cluster: SparkCluster,
    cluster_session: SparkConnectServer,
    dag_id: str,
) -> None:
    _, run = cluster_examples[dag_id]
    CHECKS[dag_id](run)
    ran_on_the_workers(spark_cluster, run.xcoms, spark_cluster.master_url if dag_id == PER_JOB else cluster_session.url)


def test_cached_tables(
    cluster_examples: dict[str, tuple[str, ExampleRun]],
    spark_cluster: SparkCluster,
    cluster_session: SparkConnectServer,
) -> None:
    """b computed once, by the first of max_b and min_b (which run at once: the other waits for its copy), and read
    from its copy by the three other tasks; the values are those of b's query over flip36_a, computed here; the copy
    released at the end."""
    _, run = cluster_examples["example_spark_cache"]
    x = run.xcoms
    uses = {task: x[task]["caches"]["b"] for task in ("max_b", "min_b", "normalise_b", "count_b")}
    assert sorted(b["status"] for b in uses.values()) == ["hit", "hit", "hit", "miss"]
    assert uses["normalise_b"]["status"] == uses["count_b"]["status"] == "hit"
    assert x["release_caches"]["usage"]["b"]["misses"] == 1 and x["release_caches"]["usage"]["b"]["hits"] == 3

    ids = np.arange(2_000_000)  # flip36_a: id, k = id % 20000, v = id % 997; b: sum(v) by k
    totals = np.bincount(ids % 20000, weights=ids % 997)
    assert x["max_b"]["rows"][0][0] == totals.max() and x["min_b"]["rows"][0][0] == totals.min()
    assert x["count_b"]["rows"] == [[20000, 2_000_000]]
    assert len(x["normalise_b"]["rows"]) == 5
    assert len(x["release_caches"]["released"]["b"]) == 1
    assert not list((run.home / "cache").rglob("part-*")), "the copy must be released"
    assert not list(run.home.rglob(".spark_tables_probe-*")), "probes must be removed"
    ran_on_the_workers(spark_cluster, x, cluster_session.url)


def _run_tab(airflow: AirflowServices, dag_id: str, run_id: str) -> dict:
    return airflow.plugin(f"/dags/{dag_id}/runs/{quote(run_id, safe='')}")


def test_the_runs_spark_tables_tabs_and_the_overview_show_what_they_did(
    cluster_airflow: AirflowServices, on_cluster: Deployment, cluster_examples: dict[str, tuple[str, ExampleRun]]
) -> None:
    """The cache run's copy, written by its one miss and read by the others; the CTAS run's tables; the lookup run's
    joins and reload; the overview of the day."""
    airflow = cluster_airflow
    run_id, run = cluster_examples["example_spark_cache"]
    uses = {task: run.xcoms[task]["caches"]["b"] for task in ("max_b", "min_b", "normalise_b", "count_b")}
    [writer] = [task for task, use in uses.items() if use["status"] == "miss"]
    assert writer in ("max_b", "min_b") and {u["location"] for u in uses.values()} == {uses[writer]["location"]}
    [cache] = _run_tab(airflow, "example_spark_cache", run_id)["caches"]
    [copy] = cache["copies"]
    assert (copy["written_by"], copy["state"], copy["rows"]) == (writer, "released", 20000)
    assert sorted(e["task_id"] for e in copy["events"] if e["event"] == "read") == sorted(set(uses) - {writer})

    run_id, _ = cluster_examples["example_spark_ctas"]
    tables = metastore_tables(on_cluster)
    snapshot = "order_snapshot_" + CLUSTER_CTAS_DS.replace("-", "")
    assert tables[snapshot]["spark_tables.ctas.state"] == "complete"
    tab = _run_tab(airflow, "example_spark_ctas", run_id)
    assert sorted((t["task_id"], t["table"], t["created"]) for t in tab["ctas"]) == [
        ("publish_customer_totals", "customer_totals", True),
        ("snapshot_orders", snapshot, True),
    ]

    run_id, _ = cluster_examples["example_spark_lookup"]
    tab = _run_tab(airflow, "example_spark_lookup", run_id)
    assert sorted((lookup["task_id"], lookup["kind"]) for lookup in tab["lookups"]) == [
        ("check_segments", "reload"),
        ("enrich_full", "join"),
        ("enrich_none", "join"),
        ("enrich_partial", "join"),
        ("enrich_segments", "join"),
        ("reload", "reload"),
        ("reload_segments", "reload"),
    ]
    versions = {lookup["task_id"]: lookup["table_version"] for lookup in tab["lookups"]}
    assert versions["check_segments"] == versions["enrich_segments"] == versions["reload_segments"] is not None
    assert versions["reload"] is None, "a PostgreSQL table has no versions"
    page = airflow.page(f"/dags/example_spark_lookup/runs/{quote(run_id, safe='')}")
    assert "demo_customers" in page

    overview = airflow.plugin("/overview?days=1")
    assert ("example_spark_cache", "b") in {(table["dag_id"], table["name"]) for table in overview["caches"]}
    assert "demo_customers" in {table["name"] for table in overview["lookups"]}


def test_the_reload_sensor_waits_in_the_triggerer(
    cluster_airflow: AirflowServices, cluster_examples: dict[str, tuple[str, ExampleRun]]
) -> None:
    """A first reload of the customers the lookup example seeded, then a second run whose sensor defers until the
    reload is due (60 s after the first load ended): its log says it deferred, the trigger fires in the triggerer and
    the sensor resumes from it."""
    airflow = cluster_airflow
    first = airflow.trigger("lookup_reload_deferred", {})
    assert airflow.finished("lookup_reload_deferred", first) == "success"

    second = airflow.trigger("lookup_reload_deferred", {})
    assert airflow.finished("lookup_reload_deferred", second) == "success"

    log = airflow.task_log("lookup_reload_deferred", second, "wait_for_reload")
    due = airflow.xcom("lookup_reload_deferred", second, "wait_for_reload")
    assert f"lookup table deferred_customers: deferring until {due}" in log, "it deferred, with the due time"
    assert f"the reload of lookup table deferred_customers is due ({due})" in log, "it resumed from the trigger"
    triggered = airflow.trigger_log("lookup_reload_deferred", second, "wait_for_reload")
    assert "DateTimeTrigger" in triggered and "Trigger fired event" in triggered, "the triggerer ran its trigger"
    assert airflow.xcom("lookup_reload_deferred", second, "reload")["snapshot"]["scheduled_for"] == due
    assert airflow.task_instance("lookup_reload_deferred", second, "wait_for_reload")["try_number"] == 1


def test_kafka_sources_sinks_and_probes_per_job_on_the_cluster(on_cluster: Deployment) -> None:
    """A plan from a topic, an aggregation into one and a lookup join of one on the standalone cluster: the
    connector's jars go with each job to its executors, which read and write the tests' broker."""
    check_kafka_scenario(on_cluster, "per-job")


def test_every_store_on_s3_per_job_on_the_cluster(
    on_cluster: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The S3 scenario on the standalone cluster, nothing of it in a shared folder: the warehouse and the provider's
    roots in a bucket, the executors given the connection's keys by their driver (``spark.executorEnv``)."""
    bucket = s3.new_bucket("cluster-stores")
    database = _empty_database(CLUSTER_METASTORE_DATABASE.replace("spark_tables_cluster", "spark_tables_cluster_s3"))
    base = postgres_deployment(tmp_path_factory.mktemp("airflow-cluster-s3"), database, f"s3a://{bucket}/warehouse")
    spark = {name: on_cluster.env[name] for name in ("AIRFLOW_CONN_SPARK_DEFAULT", "SPARK_LOCAL_IP")}
    check_s3_scenario(on_s3(dataclasses.replace(base, env={**base.env, **spark}), bucket, False), bucket, "per-job")


@pytest.fixture(scope="module")
def refusals(on_cluster: Deployment, spark_cluster: SparkCluster) -> tuple[dict[str, Any], str, int]:
    """One run of the scenario of refusals on the cluster's deployment: each task's failed-try report, the log and
    the port of the unreachable master. The cache and lookup roots are on a folder of the driver's machine that
    the workers do not see (a local disk, not the shared mount)."""
    port = _free_port()  # nothing listens there
    connections = {
        "SPARK_UNREACHABLE": {"host": f"spark://127.0.0.1:{port}", "extra": {"deploy-mode": "client"}},
        "SPARK_CLUSTER_MODE": {"host": spark_cluster.master_url, "extra": {"deploy-mode": "cluster"}},
    }
    env = {
        **on_cluster.env,
        "AIRFLOW__SPARK_TABLES__CACHE_URI": f"file://{spark_cluster.driver_only}/cache",
        "AIRFLOW__SPARK_TABLES__LOOKUP_URI": f"file://{spark_cluster.driver_only}/lookup",
        **{f"AIRFLOW_CONN_{name}": json.dumps({"conn_type": "spark", **c}) for name, c in connections.items()},
    }
    deployment = dataclasses.replace(on_cluster, env=env).with_dags(SCENARIOS)
    done = deployment.airflow("dags", "test", "cluster_refusals")
    assert done.returncode != 0, done.stdout[-3000:] + done.stderr[-3000:]
    return deployment.latest_xcoms("cluster_refusals", FAILED_TRY), done.stdout + done.stderr, port


def test_a_cache_root_the_executors_do_not_share_fails_the_job_before_its_work_naming_the_setting(
    refusals: tuple[dict[str, Any], str, int], spark_cluster: SparkCluster
) -> None:
    """The job uses the cache root, which is probed; the lookup root, as unshared, is not, as the job does not use
    it."""
    reports, log, _ = refusals
    cache = spark_cluster.driver_only / "cache"
    assert reports["unshared_cache_root"]["error"] == (
        f"[spark_tables] cache_uri file://{cache} is not shared: the driver on {socket.gethostname()} does not see "
        f"the file an executor on {socket.gethostname()} wrote there: put it on a folder every Spark node and the "
        "Airflow workers mount at the same path (NFS, say), or on object storage"
    )
    assert spark_cluster.executors(reports["unshared_cache_root"]["application_id"]), "an executor wrote the probe"
    assert "lookup_uri" not in log
    started_work = ("computing it and writing a copy", "statement 1/1")  # the driver's first lines of work
    assert not any(line in log for line in started_work), "the job's work must not have started"
    assert not list(cache.rglob("part-*")), "no copy of the cached table was written"


def test_an_unreachable_master_fails_at_once_naming_it(refusals: tuple[dict[str, Any], str, int]) -> None:
    reports, log, port = refusals
    assert reports["unreachable_master"] == {
        "try_number": 1,
        "error": f"Spark master spark://127.0.0.1:{port} of connection 'spark_unreachable' cannot be reached "
        f"(127.0.0.1:{port}: Connection refused): start it, or correct the connection's host and port",
        "cleanup": None,
    }, "nothing was submitted: no application"
    assert f"--master spark://127.0.0.1:{port}" not in log


def test_cluster_deploy_mode_on_the_standalone_master_fails_before_submitting(
    refusals: tuple[dict[str, Any], str, int], spark_cluster: SparkCluster
) -> None:
    reports, log, _ = refusals
    assert reports["cluster_deploy_mode"] == {
        "try_number": 1,
        "error": f"Spark connection 'spark_cluster_mode': deploy-mode cluster on the standalone master "
        f"{spark_cluster.master_url}: Spark runs Python drivers only in client mode there: set deploy-mode client",
        "cleanup": None,
    }, "nothing was submitted: no application"
    assert "--deploy-mode cluster" not in log


def test_a_job_per_job_on_the_cluster_makes_and_merges_into_a_delta_table_with_delta_s_jars_on_the_executors(
    on_cluster: Deployment, spark_cluster: SparkCluster, spark_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The catalog loads Delta Lake, as docker/compose.yaml's does, and makes it its default format: spark-submit
    hands Delta's jars to the workers' executors, which write the table's files and its log on the shared folder; a
    CTAS that names no format is a Delta table in one commit, with FLIP-218's marks in it, a MERGE the next, each
    version readable."""
    from spark_tables.hooks.spark_job import SparkJobHook

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", on_cluster.env["AIRFLOW_CONN_SPARK_DEFAULT"])
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    catalog = dataclasses.replace(on_cluster.catalog, table_formats=("delta",), default_format="delta")
    ensure_metastore_schema(catalog)  # as the operator does before its job
    table = "delta_on_cluster"
    statements = (
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} AS SELECT id, 'old' AS v FROM range(10)",
        f"MERGE INTO {table} t USING (SELECT id, 'new' AS v FROM range(5, 15)) c ON t.id = c.id "
        "WHEN MATCHED THEN UPDATE SET v = c.v WHEN NOT MATCHED THEN INSERT *",
        f"SELECT v, count(*) AS n, (SELECT count(*) FROM {table} VERSION AS OF 0) AS made FROM {table} GROUP BY v "
        "ORDER BY v",
    )
    owner = TableOwner(dag_id="lake", run_id="manual__1", task_id="on_cluster")
    spec = JobSpec(job=SqlJob(statements=read_statements(statements), owner=owner), result_uri=f"file://{spark_env}/r")
    result = SparkJobHook(spec=spec, catalog=catalog, name="delta-on-cluster").run()

    assert result.succeeded, result.error
    assert result.output is not None and result.output.rows == [["new", 10, 10], ["old", 5, 10]]
    [made] = result.output.ctas
    assert (made.format, made.atomicity, made.rows, made.committed_version) == ("delta", "commit", 10, 0)
    assert spark_cluster.executors(result.application_id), "the workers ran its executors"
    assert Path(made.location.removeprefix("file:")).is_relative_to(catalog.warehouse), "on the shared folder"
