"""Which locations are on S3, and how a job is told to reach them (core/object_storage.py): the connection's keys
only in an environment, S3A's settings without a secret, s3fs path-style where an endpoint is given."""

from __future__ import annotations

from spark_tables.core.job_spec import SECRET_NAME
from spark_tables.core.object_storage import (
    S3Access,
    bucket_of,
    executor_environment,
    on_s3,
    s3_locations,
    s3fs_options,
)

KEYS = {"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "AWS_SESSION_TOKEN": "t0ken"}


def test_s3_locations_are_found_anywhere_in_a_spec_by_their_scheme() -> None:
    spec = {
        "result_uri": "s3://b1/exchange/x.json",
        "caches": [{"location": "s3a://b2/cache/t"}, {"location": "file:///tmp/cache"}],
        "job": {"checkpoint": "S3N://b3/c", "query": "SELECT 's3://not-a-location' AS s", "n": 3},
    }
    assert list(s3_locations(spec)) == ["s3://b1/exchange/x.json", "s3a://b2/cache/t", "S3N://b3/c"]
    assert [bucket_of(location) for location in s3_locations(spec)] == ["b1", "b2", "b3"]
    assert not on_s3("/tmp/s3://x") and not on_s3("gs://b/x") and not on_s3(None)


def test_the_keys_go_to_an_environment_and_s3as_settings_hold_no_secret() -> None:
    access = S3Access(credentials=KEYS, endpoint="http://127.0.0.1:9000", region="eu-west-1")
    assert access.environment() == {**KEYS, "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1"}
    conf = access.spark_conf()
    assert not [key for key in conf if SECRET_NAME.search(key)]
    assert not set(conf.values()) & set(KEYS.values())
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"


def test_aws_s3_itself_needs_no_endpoint_and_a_connection_without_keys_hands_none() -> None:
    access = S3Access()
    assert access.environment() == {}
    assert "spark.hadoop.fs.s3a.endpoint" not in access.spark_conf()
    assert S3Access(endpoint="https://s3.example.com").spark_conf()["spark.hadoop.fs.s3a.connection.ssl.enabled"] == (
        "true"
    )


def test_the_driver_hands_its_storage_variables_to_the_executors_and_nothing_else() -> None:
    environment = {**KEYS, "AWS_ENDPOINT_URL_S3": "http://e", "HOME": "/root", "AWS_REGION": ""}
    assert executor_environment(environment) == {
        "spark.executorEnv.AWS_ACCESS_KEY_ID": "AKIA1",
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "spark.executorEnv.AWS_SESSION_TOKEN": "t0ken",
        "spark.executorEnv.AWS_ENDPOINT_URL_S3": "http://e",
    }
    assert all(SECRET_NAME.search(key) for key in executor_environment(KEYS) if "ACCESS_KEY_ID" not in key)


def test_s3fs_reaches_an_endpoint_of_its_own_path_style() -> None:
    assert s3fs_options({"AWS_ENDPOINT_URL_S3": "http://e"}) == {"config_kwargs": {"s3": {"addressing_style": "path"}}}
    assert s3fs_options({}) == {}
