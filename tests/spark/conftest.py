"""One local SparkSession for every test of job logic in this folder, and a database of each test's own."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS, POSTGRES_JDBC_DRIVER, S3A_JARS
from tests.s3 import s3a_conf
from tests.spark.page_views import PG_SCHEMA
from tests.spark.postgres import run_sql


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    warehouse = tmp_path_factory.mktemp("warehouse")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers: this interpreter, which has spark_tables
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("spark_tables-tests")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.log.level", "WARN")
        .config("spark.pyspark.python", sys.executable)
        # lookup tables' full-cache reloads, Kafka topics' sources, s3a:// (S3A's on the JVM from its start)
        .config("spark.jars", ",".join([POSTGRES_JDBC_DRIVER, *KAFKA_CONNECTOR_JARS, *S3A_JARS]))
    )
    for name, value in s3a_conf().items():
        builder = builder.config(name, value)
    session = builder.getOrCreate()
    yield session
    session.stop()
    # py4j logs from __del__ at interpreter exit, after pytest has closed the streams it captured.
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture
def db(spark: SparkSession, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of this test's own, dropped with its files afterwards."""
    name = "ctas_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    spark.sql(f"CREATE DATABASE {name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")


@pytest.fixture
def views(spark: SparkSession, db: str, tmp_path: Path) -> Iterator[Path]:
    """The table ``views`` of ``page_views`` (its folder is returned), and its PostgreSQL schema, dropped after."""
    folder = tmp_path / "views"
    folder.mkdir()
    spark.sql(
        f"CREATE TABLE {db}.views (page STRING, user STRING, ms BIGINT, ts TIMESTAMP) USING json "
        f"OPTIONS (maxFilesPerTrigger 1) LOCATION '{folder}'"
    )
    spark.sql(f"USE {db}")
    run_sql(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE", f"CREATE SCHEMA {PG_SCHEMA}")
    yield folder
    spark.sql("USE default")
    run_sql(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")
