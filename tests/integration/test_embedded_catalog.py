"""Derby admits one Spark application at a time: a collision fails with a line that says what to do."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.spark_job import SparkJobFailed, SparkJobHook
from tests.integration.conftest import VENV_BIN

pytestmark = pytest.mark.integration


def test_a_job_on_a_derby_metastore_held_elsewhere_fails_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    catalog = EmbeddedCatalog(home=str(tmp_path / "catalog"))
    command = [str(VENV_BIN / "spark-submit"), "--master", "local[1]"]
    for key, value in {**catalog.spark_conf(), "spark.pyspark.python": sys.executable}.items():
        command += ["--conf", f"{key}={value}"]
    release = tmp_path / "release"
    os.mkfifo(release)
    holder = subprocess.Popen(
        [*command, str(Path(__file__).with_name("hold_catalog.py")), str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert any(line.startswith("HOLDING") for line in holder.stdout), "the holder never opened the catalog"
        hook = SparkJobHook(
            spec=JobSpec(job=SqlJob(statements=("SHOW DATABASES",)), result_uri=f"file://{tmp_path}/result.json"),
            catalog=catalog,
            name="derby-collision",
        )
        with pytest.raises(SparkJobFailed) as failure:
            hook.run()
        message = str(failure.value)
        assert "is in use by another Spark application" in message
        assert "configure a PostgreSQL metastore" in message
        assert "\n" not in message
    finally:
        with contextlib.suppress(OSError):  # no reader: the holder never got that far
            os.close(os.open(release, os.O_WRONLY | os.O_NONBLOCK))  # EOF for the holder, which then stops
        try:
            holder.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
