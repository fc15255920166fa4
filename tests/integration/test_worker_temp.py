"""A task leaves nothing behind on the worker (issue 26, item 4): a Spark driver's temporary folders go with it.

The job runs through the provider's hook, as a task runs it, with the worker's temporary folder (``TMPDIR`` for
Python, ``java.io.tmpdir`` for the JVMs) pointed at a folder of the test's own, so other tests' drivers do not count.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.spark_job import SparkJobHook
from tests.integration.conftest import VENV_BIN

pytestmark = pytest.mark.integration


def test_a_job_on_the_hive_catalog_leaves_no_temporary_folder_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_tmp = tmp_path / "worker-tmp"
    worker_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(worker_tmp))
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"-Djava.io.tmpdir={worker_tmp}")
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    spec = JobSpec(
        job=SqlJob(statements=("CREATE DATABASE IF NOT EXISTS temps", "SHOW TABLES IN temps")),
        result_uri=f"file://{tmp_path}/result.json",
    )

    result = SparkJobHook(spec=spec, catalog=EmbeddedCatalog(home=str(tmp_path / "catalog")), name="temps").run()

    assert result.succeeded, result.error
    assert sorted(path.name for path in worker_tmp.iterdir()) == []
