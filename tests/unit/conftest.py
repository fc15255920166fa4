"""Fixtures for unit tests: Airflow connections and ``[spark_tables]`` settings from environment variables only."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

#: Connections and settings a developer's shell may carry; every test that reads them starts without them.
_AMBIENT_VARIABLES = (
    "AIRFLOW_CONN_SPARK_DEFAULT",
    "AIRFLOW_CONN_SPARK_TABLES_DEFAULT",
    "AIRFLOW__SPARK_TABLES__HOME",
    "AIRFLOW__SPARK_TABLES__EXCHANGE_URI",
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
