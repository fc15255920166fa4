"""The tests' S3-compatible server: moto's, on loopback, which scripts/test.sh starts once for the whole run
(scripts/s3_server.py) and names in ``SPARK_TABLES_TEST_S3``; buckets of each test's own on it, and the Hadoop
settings by which Spark's S3A reaches it."""

from __future__ import annotations

import os
import uuid

import boto3

from spark_tables.core.object_storage import S3Access

#: moto takes any key pair until told to check them.
ACCESS_KEY, SECRET_KEY = "tests-access-key", "tests-secret-key"
REGION = "us-east-1"


def endpoint() -> str:
    """The server's endpoint, http://host:port."""
    address = os.environ.get("SPARK_TABLES_TEST_S3")
    assert address, "no S3 server: run the tests with scripts/test.sh, which starts one (SPARK_TABLES_TEST_S3)"
    return address


def client() -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint(),
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


def new_bucket(prefix: str = "bucket") -> str:
    """A bucket no other test uses."""
    bucket = f"{prefix}-{uuid.uuid4().hex[:12]}"
    client().create_bucket(Bucket=bucket)
    return bucket


def s3a_conf() -> dict[str, str]:
    """Spark's settings of S3A for the server, the tests' keys among them: for a session made in the tests' process,
    which takes no environment of its own."""
    return {
        **access().spark_conf(),
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
        "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
    }


def access() -> S3Access:
    """How a Spark application reaches the server: the tests' keys, its endpoint and region."""
    keys = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    return S3Access(credentials=keys, endpoint=endpoint(), region=REGION)
