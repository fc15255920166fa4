"""Every store on S3 (issue 46, item 3), through ``airflow dags test`` against the tests' S3 server: the warehouse,
the cache, lookup, checkpoint and exchange roots in one bucket, the aws connection's keys the only credentials the
tasks and their jobs are given. Per job (the PostgreSQL metastore's warehouse on S3) and in session mode (the Connect
server reaches the bucket with its own keys; the scenario's database is located there); the standalone cluster's run
is test_cluster.py's. A missing bucket and a wrong key fail in one line naming the location, before any job."""

from __future__ import annotations

import dataclasses
import json
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import psycopg
import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import JobSpec
from tests import s3
from tests.integration import as_deployed
from tests.integration.conftest import (
    LOOKUP_DEMO_CONN,
    PG_DATABASE,
    PG_HOST,
    PG_PORT,
    PG_USER,
    SCENARIOS,
    Deployment,
    _empty_database,
    _session_deployment,
    dags_test,
    postgres_deployment,
)

pytestmark = pytest.mark.integration

DAG_ID = "s3_stores"
#: What a run leaves in the bucket: the exchange's files go once the task has read them.
STORES = ("warehouse", "cache", "lookup", "checkpoints")


def aws_connection(access_key: str = s3.ACCESS_KEY, secret_key: str = s3.SECRET_KEY) -> str:
    """The aws connection to the tests' S3 server, as ``AIRFLOW_CONN_AWS_DEFAULT`` takes it."""
    return as_deployed.aws_connection(endpoint=s3.endpoint(), access_key=access_key, secret_key=secret_key)


def on_s3(base: Deployment, bucket: str, database_location: bool) -> Deployment:
    """``base`` with every root of the provider in ``bucket`` (and the scenario's database there, where the
    catalog's warehouse is not), reached through the aws connection."""
    root = f"s3://{bucket}"
    env = {
        "AIRFLOW_CONN_AWS_DEFAULT": aws_connection(),
        "AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO": LOOKUP_DEMO_CONN,
        "AIRFLOW__SPARK_TABLES__CACHE_URI": f"{root}/cache",
        "AIRFLOW__SPARK_TABLES__LOOKUP_URI": f"{root}/lookup",
        "AIRFLOW__SPARK_TABLES__CHECKPOINT_URI": f"{root}/checkpoints",
        "AIRFLOW__SPARK_TABLES__EXCHANGE_URI": f"{root}/exchange",
        "SPARK_TABLES_TEST_S3_DATABASE": f"s3a://{bucket}/warehouse/s3_scenario.db" if database_location else "",
    }
    return dataclasses.replace(base, env={**base.env, **env}).with_dags(SCENARIOS)


def _customers() -> None:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname="spark_tables_test", user=PG_USER, autocommit=True) as db:
        db.execute("CREATE SCHEMA IF NOT EXISTS s3_scenario")
        db.execute("DROP TABLE IF EXISTS s3_scenario.customers")
        db.execute("CREATE TABLE s3_scenario.customers (customer_id int PRIMARY KEY, name text)")
        db.execute("INSERT INTO s3_scenario.customers SELECT i, 'customer ' || i FROM generate_series(1, 5) i")


def _stores(bucket: str) -> set[str]:
    """The roots under which the bucket holds objects."""
    pages = s3.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {item["Key"].split("/", 1)[0] for page in pages for item in page.get("Contents", [])}


def check_s3_scenario(deployment: Deployment, bucket: str, mode: str) -> None:
    """Two runs of the scenario: every task's work on S3, the second run's aggregation from its checkpoint."""
    _customers()
    first = dags_test(deployment, DAG_ID)
    assert first.xcoms["add_orders"]["mode"] == mode
    root = f"s3://{bucket}"
    snapshot = first.xcoms["snapshot"]
    assert (snapshot["rows"], snapshot["created"], snapshot["format"]) == (100, True, "delta")
    assert snapshot["location"] == f"s3a://{bucket}/warehouse/s3_scenario.db/order_snapshot"
    largest, smallest = first.xcoms["largest"]["caches"]["totals"], first.xcoms["smallest"]["caches"]["totals"]
    assert (largest["status"], smallest["status"]) == ("miss", "hit")
    assert largest["location"].startswith(f"{root}/cache/") and smallest["location"] == largest["location"]
    assert smallest["bytes_read"] == largest["bytes_written"] > 0
    # customer 5 holds the orders n % 5 == 4; customer 1 those n % 5 == 0
    assert first.xcoms["largest"]["rows"] == [[float(sum(range(4, 100, 5)))]]
    assert first.xcoms["smallest"]["rows"] == [[float(sum(range(0, 100, 5)))]]
    reload = first.xcoms["reload"]["snapshot"]
    assert reload["rows"] == 5 and reload["location"].startswith(f"{root}/lookup/s3_scenario_customers-")
    enrich = first.xcoms["enrich"]
    assert (enrich["rows"], enrich["metrics"]["hitCount"], enrich["snapshot"]) == (100, 100, reload["version"])
    counted = first.xcoms["count"]["query"]
    assert counted["checkpoint"].startswith(f"{root}/checkpoints/aggregations/")
    assert (counted["input_rows"], counted["rows_upserted"]) == (100, 5)
    assert _stores(bucket) == set(STORES)

    second = dags_test(deployment, DAG_ID)
    assert second.xcoms["snapshot"]["rows"] == 200
    counted = second.xcoms["count"]["query"]
    assert (counted["input_rows"], counted["rows_upserted"]) == (100, 5), "from the first run's checkpoint on S3"
    assert second.xcoms["largest"]["rows"] == [[2.0 * sum(range(4, 100, 5))]], "a copy of this run, not the last"
    local = [store for store in (*STORES, "exchange") if (second.home / store).exists()]
    assert local == [], f"stores made in the provider's local home: {local}"


def test_per_job_every_store_is_on_s3(tmp_path_factory: pytest.TempPathFactory) -> None:
    bucket = s3.new_bucket("stores")
    home = tmp_path_factory.mktemp("airflow-s3")
    base = postgres_deployment(
        home,
        _empty_database(PG_DATABASE.replace("spark_tables_test", "spark_tables_s3", 1)),
        f"s3a://{bucket}/warehouse",
    )
    check_s3_scenario(on_s3(base, bucket, database_location=False), bucket, "per-job")


def test_in_session_mode_every_store_is_on_s3(tmp_path_factory: pytest.TempPathFactory, connect_server: Any) -> None:
    """On the session tests' server, from an Airflow of its own: the provider's local home is this test's alone."""
    bucket = s3.new_bucket("session-stores")
    base = _session_deployment(tmp_path_factory.mktemp("airflow-session-s3"), connect_server)
    check_s3_scenario(on_s3(base, bucket, database_location=True), bucket, "session")


@pytest.fixture
def aws_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's aws connection: the tests' S3 server with the tests' keys."""
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", aws_connection())


def test_a_missing_bucket_fails_in_one_line_naming_the_location_and_the_connection(aws_default: None) -> None:
    from spark_tables.hooks.object_storage import s3_access_for

    spec = {"result_uri": f"s3://{s3.new_bucket()}/exchange/r.json", "caches": ["s3a://no-such-bucket/cache/t"]}
    with pytest.raises(SpecError) as refused:
        s3_access_for(spec)
    assert str(refused.value) == (
        f"s3a://no-such-bucket/cache/t: bucket 'no-such-bucket' does not exist on {s3.endpoint()} (connection "
        "'aws_default'): create it, or correct the setting that names it"
    )


def test_a_wrong_key_fails_in_one_line_naming_the_location_and_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a server of this test's own that checks keys (the run's server takes any): moto's, told to check them."""
    from moto.server import ThreadedMotoServer

    from spark_tables.hooks.object_storage import s3_access_for

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        boto3.client(
            "s3", endpoint_url=endpoint, region_name=s3.REGION, aws_access_key_id="a", aws_secret_access_key="b"
        ).create_bucket(Bucket="checked")
        urllib.request.urlopen(
            urllib.request.Request(
                f"{endpoint}/moto-api/reset-auth", data=b"0", headers={"Content-Type": "text/plain"}, method="POST"
            )
        ).close()
        extra = {"endpoint_url": endpoint, "region_name": s3.REGION}
        conn = {"conn_type": "aws", "login": "AKIAWRONG", "password": "wrong", "extra": extra}
        monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(conn))
        with pytest.raises(SpecError) as refused:
            s3_access_for({"checkpoint": "s3://checked/checkpoints/q"})
    finally:
        urllib.request.urlopen(
            urllib.request.Request(
                f"{endpoint}/moto-api/reset-auth", data=b"inf", headers={"Content-Type": "text/plain"}, method="POST"
            )
        ).close()
        server.stop()
    assert str(refused.value) == (
        f"s3://checked/checkpoints/q: {endpoint} refuses the credentials of connection 'aws_default' "
        "(InvalidAccessKeyId): correct its keys, or give them the right to list the bucket"
    )


def test_a_job_naming_s3_gets_s3as_jars_and_settings_and_the_keys_only_in_its_environment(
    aws_default: None, spark_env: Path
) -> None:
    from spark_tables.core.catalog_config import EmbeddedCatalog
    from spark_tables.core.jvm_jars import S3A_JARS
    from spark_tables.core.sql.job import SqlJob
    from spark_tables.hooks.spark_job import SparkJobHook

    bucket = s3.new_bucket()
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"s3://{bucket}/exchange/r.json")
    hook = SparkJobHook(spec=spec, catalog=EmbeddedCatalog(home=str(spark_env / "home")))
    command = " ".join(hook.submit_command("entry.py"))
    assert all(jar in command for jar in S3A_JARS)
    assert f"spark.hadoop.fs.s3a.endpoint={s3.endpoint()}" in command
    assert s3.SECRET_KEY not in command and s3.ACCESS_KEY not in command and s3.SECRET_KEY not in spec.to_json()
    environment = hook.submit_environment()
    assert environment is not None
    assert (environment["AWS_ACCESS_KEY_ID"], environment["AWS_SECRET_ACCESS_KEY"]) == (s3.ACCESS_KEY, s3.SECRET_KEY)
    assert environment["AWS_ENDPOINT_URL_S3"] == s3.endpoint()

    local = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"file://{spark_env}/r.json")
    plain = SparkJobHook(spec=local, catalog=EmbeddedCatalog(home=str(spark_env / "home")))
    assert plain.submit_environment() is None and "hadoop-aws" not in " ".join(plain.submit_command("entry.py"))

    with pytest.raises(SpecError, match=r"deploy-mode cluster with S3 keys of connection 'aws_default'"):
        SparkJobHook(spec=spec, catalog=EmbeddedCatalog(home=str(spark_env / "home")), deploy_mode="cluster")
