"""The driver JVM's class-data archive: made by the first driver, mapped by later ones, never in the user's way."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.spark_job import SparkJobHook
from spark_tables.utils.class_archive import UNUSED_FOR_SECONDS, ClassArchive
from spark_tables.utils.job_package import ENTRY_SCRIPT

pytestmark = pytest.mark.usefixtures("spark_tables_home")


def dumped_by_the_driver(option: str) -> None:
    """What the JVM does at exit with -XX:ArchiveClassesAtExit: write the archive."""
    path = option.split()[0].split("=", 1)[1]
    with open(path, "wb") as handle:
        handle.write(b"classes")


def test_the_first_driver_writes_the_archive_and_later_ones_map_it(tmp_path):
    first = ClassArchive(str(tmp_path), None)

    option = first.java_option("-Dderby.stream.error.file=/x")
    assert option.startswith("-XX:ArchiveClassesAtExit=") and not os.path.exists(first.path)
    dumped_by_the_driver(option)
    first.keep()

    assert Path(first.path).read_bytes() == b"classes"
    assert ClassArchive(str(tmp_path), None).java_option("") == f"-XX:SharedArchiveFile={first.path}"
    assert os.listdir(tmp_path) == [os.path.basename(first.path)], "no temporary file is left"


def test_a_driver_that_wrote_no_archive_publishes_nothing(tmp_path):
    archive = ClassArchive(str(tmp_path), None)
    archive.java_option("")  # the driver was killed before it could write it

    archive.keep()

    assert os.listdir(tmp_path) == []
    assert ClassArchive(str(tmp_path), None).java_option("").startswith("-XX:ArchiveClassesAtExit=")


@pytest.mark.parametrize("choice", ["-XX:SharedArchiveFile=/mine.jsa", "-Xshare:off", "-XX:ArchiveClassesAtExit=/a"])
def test_a_user_s_own_archive_option_is_kept(tmp_path, choice):
    assert ClassArchive(str(tmp_path), None).java_option(f"-Xmx1g {choice}") is None


def test_another_class_path_has_another_archive(tmp_path):
    jar = tmp_path / "postgresql.jar"
    jar.write_bytes(b"jar")
    assert ClassArchive(str(tmp_path), None).path != ClassArchive(str(tmp_path), str(jar)).path


def test_making_an_archive_removes_other_archives_unused_for_a_week_and_keeps_recent_ones(tmp_path):
    stale, recent = tmp_path / "spark-driver-old.jsa", tmp_path / "spark-driver-other.jsa"
    for path in (stale, recent):
        path.write_bytes(b"x")
    week_ago = time.time() - UNUSED_FOR_SECONDS - 60
    os.utime(stale, (week_ago, week_ago))
    archive = ClassArchive(str(tmp_path), None)
    dumped_by_the_driver(archive.java_option(""))

    archive.keep()

    assert sorted(os.listdir(tmp_path)) == sorted([recent.name, os.path.basename(archive.path)])


def _java_options(hook: SparkJobHook) -> str:
    hook._use_class_archive()
    command = hook.submit_command(ENTRY_SCRIPT)
    confs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return next(c.split("=", 1)[1] for c in confs if c.startswith("spark.driver.extraJavaOptions="))


@pytest.fixture
def hook_for(spark_tables_home):
    def make(**kwargs) -> SparkJobHook:
        spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///tmp/r.json")
        return SparkJobHook(spec=spec, catalog=EmbeddedCatalog(home=str(spark_tables_home)), **kwargs)

    return make


def test_a_local_driver_gets_the_archive_option_beside_the_catalog_s(hook_for, spark_tables_home):
    options = _java_options(hook_for())

    assert "-Dderby.stream.error.file=" in options
    assert f"-XX:ArchiveClassesAtExit={spark_tables_home}/jvm/spark-driver-" in options


def test_the_archive_can_be_turned_off(hook_for, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE", "off")
    assert "XX:" not in _java_options(hook_for())


def test_a_driver_in_cluster_mode_gets_no_archive(hook_for, set_connection):
    set_connection("spark_cluster", conn_type="spark", host="yarn", extra={"deploy-mode": "cluster"})
    assert "XX:" not in _java_options(hook_for(conn_id="spark_cluster"))
