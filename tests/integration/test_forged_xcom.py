"""A cache registry XCom forged through Airflow's REST API, by a user with the right to edit the DAG's XComs: its
descriptor names a folder outside the cache root. The tasks that read the registry and the release that deletes
what it names must leave that folder alone, with real Airflow (API server, ``airflow tasks test``) and Spark (its
jobs in session mode, on the tests' Spark Connect server: the copies are files, as per job)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from spark_tables.core.cache.table import registry_key
from tests.integration.conftest import VENV_BIN
from tests.integration.monitoring_server import ApiServer, api_server

pytestmark = pytest.mark.integration

DAGS = Path(__file__).with_name("forged_dags")
KEY = registry_key("b")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, connect_server: Any) -> Iterator[ApiServer]:
    home = tmp_path_factory.mktemp("airflow-forged")
    session = json.dumps(connect_server.connection)
    with api_server(home, DAGS, ["forged_registry"], AIRFLOW_CONN_SPARK_DEFAULT=session) as served:
        yield served


@pytest.fixture(scope="module")
def victim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of someone else's files the worker can reach (``s3://prod-lake/`` in the issue's words)."""
    folder = tmp_path_factory.mktemp("prod-lake")
    (folder / "orders.parquet").write_text("not the cache's")
    return folder


def _tasks_test(server: ApiServer, task_id: str) -> subprocess.CompletedProcess[str]:
    run_id = server.run_id("forged_registry")
    return subprocess.run(
        [str(VENV_BIN / "airflow"), "tasks", "test", "forged_registry", task_id, run_id],
        env=server.env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_registry_entry_forged_through_the_api_is_neither_read_nor_deleted(server: ApiServer, victim: Path) -> None:
    run_id = quote(server.run_id("forged_registry"), safe="")
    base = f"/api/v2/dags/forged_registry/dagRuns/{run_id}/taskInstances/writer/xcomEntries"
    token = server.token("alice")
    reader_result = server.xcom("forged_registry", "reader")
    written = reader_result["caches"]["b"]  # the run's reader read the writer's copy: a real descriptor's shape
    assert written["status"] == "hit" and reader_result["mode"] == "session"
    genuine = {
        "type": "spark_tables.cache_descriptor/1",
        "name": "b",
        "fingerprint": written["fingerprint"],
        "location": f"file://{victim}",
        "format": "parquet",
        "schema": "{}",
        "partitions": [{"file": "orders.parquet", "rows": 1, "bytes": 15, "crc32": 0}],
        "owner": {
            "dag_id": "forged_registry",
            "run_id": server.run_id("forged_registry"),
            "task_id": "writer",
            "map_index": -1,
            "try_number": 1,
        },
        "written_at": "2026-11-28T00:00:00+00:00",
    }
    created = server.request("POST", base, token, {"key": KEY, "value": genuine})
    assert created.status == 201, created.body

    reader = _tasks_test(server, "reader")
    assert reader.returncode == 0, reader.stdout[-3000:] + reader.stderr[-3000:]
    assert (victim / "orders.parquet").read_text() == "not the cache's"
    output = reader.stdout + reader.stderr
    assert "which is not a copy that task writes under the cache root: refused, and left alone" in output
    assert "0 registered copies in this run that this task can read" in output, "the forged copy is not read"

    release = _tasks_test(server, "release_caches")
    assert release.returncode == 0, release.stdout[-3000:] + release.stderr[-3000:]
    writer = _tasks_test(server, "writer")  # a task that runs again: Airflow deletes its XComs through the backend
    assert writer.returncode == 0, writer.stdout[-3000:] + writer.stderr[-3000:]

    assert (victim / "orders.parquet").read_text() == "not the cache's"
