"""Fixtures for unit tests: Airflow connections and ``[spark_tables]`` settings from environment variables only."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from spark_tables.hooks.spark_job import SparkJobHook

#: Connections and settings a developer's shell may carry; every test that reads them starts without them.
_AMBIENT_VARIABLES = (
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "AIRFLOW_CONN_SPARK_TABLES_DEFAULT",
    "AIRFLOW__SPARK_TABLES__HOME",
    "AIRFLOW__SPARK_TABLES__EXCHANGE_URI",
    "AIRFLOW__SPARK_TABLES__CACHE_URI",
    "AIRFLOW__SPARK_TABLES__CACHE_QUOTA",
    "AIRFLOW__SPARK_TABLES__LOOKUP_URI",
    "AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE",
    "AIRFLOW__CORE__XCOM_BACKEND",
)


@pytest.fixture
def spark_tables_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``[spark_tables] home`` set to a fresh folder, with no default Spark or catalog connection."""
    for name in _AMBIENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "spark_tables_home"
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__HOME", str(home))
    return home


@pytest.fixture
def set_connection(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Define an Airflow connection as ``AIRFLOW_CONN_<ID>`` in JSON form for the test's duration."""

    def define(conn_id: str, **fields: Any) -> None:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))

    return define


@pytest.fixture
def serving(set_connection: Callable[..., None]) -> None:
    """PostgreSQL connection ``serving``, a sink's, with a password."""
    set_connection("serving", conn_type="postgres", host="db", port=6432, schema="srv", login="w", password="pw")


@pytest.fixture
def no_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if anything tries to start spark-submit or any other process."""

    def refuse(*args: object, **kwargs: object) -> None:
        pytest.fail(f"a process was started: {args!r}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(SparkSubmitHook, "submit", refuse)


@pytest.fixture
def nothing_is_started(no_process: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """As ``no_process``, and no Spark job may run either."""
    monkeypatch.setattr(SparkJobHook, "run", lambda *args, **kwargs: pytest.fail("a Spark job was run"))
