"""pyspark's Python files and Spark's jars must be one release: pyspark-client writes into the same folder."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os

import pyspark
import pytest
from pyspark.sql import SparkSession

from tests.s3 import new_bucket

pytestmark = pytest.mark.spark


def _modified_files(distribution: str) -> list[str]:
    """Files of an installed distribution whose content no longer matches its RECORD."""
    dist = importlib.metadata.distribution(distribution)
    modified = []
    for file in dist.files or []:
        if file.hash is None or file.hash.mode != "sha256":
            continue
        path = file.locate()
        digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
        if digest != file.hash.value:
            modified.append(str(file))
    return modified


def test_pyspark_files_are_those_its_release_installed() -> None:
    modified = _modified_files("pyspark")
    assert modified == [], f"{len(modified)} pyspark files were overwritten, e.g. {modified[:3]}: reinstall pyspark"


def test_pyspark_client_is_the_same_release_as_pyspark() -> None:
    assert importlib.metadata.version("pyspark-client") == importlib.metadata.version("pyspark")


def test_python_and_jvm_sides_are_one_release(spark: SparkSession) -> None:
    jars = os.listdir(os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    core_jars = [jar for jar in jars if jar.startswith("spark-core_")]
    assert core_jars == [f"spark-core_2.13-{pyspark.__version__}.jar"]
    assert spark.version == pyspark.__version__


def test_the_declared_s3a_jars_reach_the_tests_s3_server(spark: SparkSession) -> None:
    """Hadoop's S3A with the AWS SDK's modules jvm/pom.xml declares (not its bundle), on Spark's own netty and HTTP
    client: a table written to a bucket of the tests' server is read back."""
    location = f"s3a://{new_bucket('installation')}/numbers"
    spark.range(10).write.parquet(location)
    assert sorted(row.id for row in spark.read.parquet(location).collect()) == list(range(10))
