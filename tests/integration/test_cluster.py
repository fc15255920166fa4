"""Every example DAG through `airflow dags test` on a Spark standalone cluster: a master and two workers on loopback,
``spark_default`` on its master in client deploy mode, a PostgreSQL metastore, and ``[spark_tables] home`` (warehouse,
cache root, lookup root, checkpoints, exchange) on a folder every worker sees. Each example is checked as on local
Spark, by the same checks, and each of its applications ran its executors in the workers' JVMs, not the driver's."""

from __future__ import annotations

import dataclasses
import json
import socket
from typing import Any

import numpy as np
import pytest

from spark_tables.core.xcom_keys import FAILED_TRY
from tests.integration.airflow_services import _free_port
from tests.integration.conftest import CLUSTER_METASTORE_DATABASE, SCENARIOS, Deployment
from tests.integration.spark_cluster import SparkCluster
from tests.integration.test_buffered_output import check_example_buffered_output
from tests.integration.test_ctas import check_example_ctas
from tests.integration.test_example_dag import check_example_sql
from tests.integration.test_lookup import _run, check_example_lookup, with_lookup_connection
from tests.integration.test_plan import check_example_plan

pytestmark = pytest.mark.integration

#: The examples' PostgreSQL tables (lookup dimension, plan and aggregation sinks): in the cluster's metastore
#: database, beside the metastore's own tables, so no local test's tables meet them.
DATABASE = CLUSTER_METASTORE_DATABASE


def ran_on_the_workers(cluster: SparkCluster, xcoms: dict[str, Any]) -> list[str]:
    """Check that each Spark task of a run ran on the cluster's master with executors the workers started; the
    applications' ids."""
    jobs = {task: x for task, x in xcoms.items() if isinstance(x, dict) and "application_id" in x}
    assert jobs, "the run has no Spark job"
    for task, x in jobs.items():
        assert x["master"] == cluster.master_url, task
        executors = cluster.executors(x["application_id"])
        assert executors, f"{task}: application {x['application_id']} had no executor on a worker"
    return [x["application_id"] for x in jobs.values()]


def test_sql(on_cluster: Deployment, spark_cluster: SparkCluster) -> None:
    check_example_sql(on_cluster)
    ran_on_the_workers(spark_cluster, on_cluster.latest_xcoms("example_spark_sql"))


def test_ctas(on_cluster: Deployment, spark_cluster: SparkCluster) -> None:
    check_example_ctas(on_cluster)
    ran_on_the_workers(spark_cluster, on_cluster.latest_xcoms("example_spark_ctas"))


def test_cached_tables(on_cluster: Deployment, spark_cluster: SparkCluster) -> None:
    """b computed once, by the first of max_b and min_b, and read from its copy by the three other tasks; the
    values are those of b's query over flip36_a, computed here; the copy released at the end."""
    done = on_cluster.airflow("dags", "test", "example_spark_cache")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    x = on_cluster.latest_xcoms("example_spark_cache")
    uses = {task: x[task]["caches"]["b"] for task in ("max_b", "min_b", "normalise_b", "count_b")}
    assert sorted(b["status"] for b in uses.values()) == ["hit", "hit", "hit", "miss"]
    assert uses["normalise_b"]["status"] == uses["count_b"]["status"] == "hit"
    assert x["release_caches"]["usage"]["b"]["misses"] == 1 and x["release_caches"]["usage"]["b"]["hits"] == 3

    ids = np.arange(2_000_000)  # flip36_a: id, k = id % 20000, v = id % 997; b: sum(v) by k
    totals = np.bincount(ids % 20000, weights=ids % 997)
    assert x["max_b"]["rows"][0][0] == totals.max() and x["min_b"]["rows"][0][0] == totals.min()
    assert x["count_b"]["rows"] == [[20000, 2_000_000]]
    assert len(x["release_caches"]["released"]["b"]) == 1
    assert not list((on_cluster.home / "spark_tables" / "cache").rglob("part-*")), "the copy must be released"
    assert not list((on_cluster.home / "spark_tables").rglob(".spark_tables_probe-*")), "probes must be removed"
    ran_on_the_workers(spark_cluster, x)


def test_lookup_joins(on_cluster: Deployment, spark_cluster: SparkCluster) -> None:
    deployment = with_lookup_connection(on_cluster, DATABASE)
    run_id, _ = _run(deployment, "example_spark_lookup")
    xcoms = check_example_lookup(deployment, run_id)
    ran_on_the_workers(spark_cluster, xcoms)


def test_compiled_plans(on_cluster: Deployment, spark_cluster: SparkCluster) -> None:
    ran_on_the_workers(spark_cluster, check_example_plan(on_cluster, DATABASE))


def test_buffered_output(on_cluster: Deployment, spark_cluster: SparkCluster) -> None:
    ran_on_the_workers(spark_cluster, check_example_buffered_output(on_cluster, DATABASE))


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
