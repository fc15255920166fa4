"""Session mode on the standalone cluster: a Spark Connect server whose application runs on the tests' cluster, its
executors on the workers, as a team that runs its Connect server on its cluster has it. A cached table is kept in
the executors' memory across tasks, and the lookups' functions run in the workers' Python from the code each task
ships to its session. The server lives for this file's tests only: it holds one of the cluster's cores while it runs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from tests.integration.conftest import PG_DATABASE, Deployment, _empty_database, dags_test, postgres_deployment
from tests.integration.spark_cluster import SparkCluster
from tests.integration.spark_connect_server import SparkConnectServer, running_spark_connect_server
from tests.integration.test_cache import check_cache_in_memory
from tests.integration.test_lookup import check_example_lookup, with_lookup_connection
from tests.integration.test_plan import DATABASE

pytestmark = pytest.mark.integration

#: The metastore of the cluster's Spark Connect server: its own, as the other servers' are.
METASTORE_DATABASE = PG_DATABASE.replace("spark_tables_test", "spark_tables_session_cluster", 1)


@pytest.fixture(scope="module")
def catalog_home(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    """An Airflow on the server's own metastore, its warehouse and ``[spark_tables] home`` where the workers see them;
    its ``spark_default`` not set yet."""
    home = tmp_path_factory.mktemp("airflow-session-cluster")
    return postgres_deployment(home, _empty_database(METASTORE_DATABASE), home / "spark_tables" / "warehouse")


@pytest.fixture(scope="module")
def cluster_connect_server(
    tmp_path_factory: pytest.TempPathFactory, catalog_home: Deployment, spark_cluster: SparkCluster
) -> Iterator[SparkConnectServer]:
    assert isinstance(catalog_home.catalog, PostgresMetastore)
    root = tmp_path_factory.mktemp("spark-connect-cluster")
    with running_spark_connect_server(root, catalog_home.catalog, spark_cluster.master_url) as server:
        yield server


@pytest.fixture(scope="module")
def on_cluster_in_session(catalog_home: Deployment, cluster_connect_server: SparkConnectServer) -> Deployment:
    """An Airflow whose ``spark_default`` is the Spark Connect server on the cluster."""
    connection = json.dumps(cluster_connect_server.connection)
    return dataclasses.replace(catalog_home, env={**catalog_home.env, "AIRFLOW_CONN_SPARK_DEFAULT": connection})


def _ran_on_the_workers(cluster: SparkCluster, server: SparkConnectServer) -> None:
    """The server's application ran executors the workers started (its driver is the server's own JVM)."""
    assert cluster.executors(server.application_id()), "no executor of the server's application on a worker"


def test_a_cached_table_is_kept_in_the_executors_memory_across_tasks_on_the_cluster(
    on_cluster_in_session: Deployment, cluster_connect_server: SparkConnectServer, spark_cluster: SparkCluster
):
    out = check_cache_in_memory(on_cluster_in_session, cluster_connect_server)

    assert {out[task]["master"] for task in ("first", "second")} == {cluster_connect_server.url}
    _ran_on_the_workers(spark_cluster, cluster_connect_server)


def test_lookup_joins_run_in_the_workers_python_from_the_code_each_task_ships(
    on_cluster_in_session: Deployment, cluster_connect_server: SparkConnectServer, spark_cluster: SparkCluster
):
    run = dags_test(with_lookup_connection(on_cluster_in_session, DATABASE), "example_spark_lookup")

    check_example_lookup(run)
    of_postgres = ("reload", "enrich_none", "enrich_partial", "enrich_full")
    jobs = (*of_postgres, "review_segments", "reload_segments", "enrich_segments")  # check_segments: no job
    assert {run.xcoms[task]["mode"] for task in jobs} == {"session"}
    assert {run.xcoms[task]["application_id"] for task in jobs} == {cluster_connect_server.application_id()}
    assert run.log.count("shipped the job's code to the session") == len(jobs)
    assert run.log.count(f"shipped the job's jars to the session: {POSTGRES_JDBC_DRIVER}") == len(of_postgres)
    _ran_on_the_workers(spark_cluster, cluster_connect_server)
