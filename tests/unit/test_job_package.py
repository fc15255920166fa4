from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from spark_tables.utils.job_package import PACKAGE_ROOT, job_package


@pytest.fixture
def package_zip(tmp_path) -> str:
    return job_package(str(tmp_path / "dist"))


def _names(path: str) -> set[str]:
    with zipfile.ZipFile(path) as archive:
        return set(archive.namelist())


def _source_files(package: str) -> set[str]:
    return {f"spark_tables/{p.relative_to(PACKAGE_ROOT).as_posix()}" for p in (PACKAGE_ROOT / package).rglob("*.py")}


def test_zip_is_built_under_the_dist_folder(tmp_path, package_zip):
    assert os.path.dirname(package_zip) == str(tmp_path / "dist")
    assert os.path.basename(package_zip).startswith("spark_tables-")
    assert zipfile.is_zipfile(package_zip)


def test_zip_holds_the_package_root_core_and_jobs(package_zip):
    names = _names(package_zip)

    assert "spark_tables/__init__.py" in names
    assert _source_files("core") <= names
    assert _source_files("jobs") <= names
    assert "spark_tables/core/job_spec.py" in names
    assert "spark_tables/jobs/entry.py" in names


@pytest.mark.parametrize("package", ["hooks", "operators", "plugins", "sensors", "triggers", "xcom"])
def test_zip_leaves_out_the_airflow_side(package_zip, package):
    assert not any(name.startswith(f"spark_tables/{package}/") for name in _names(package_zip))


def test_zip_leaves_out_provider_metadata(package_zip):
    assert "spark_tables/get_provider_info.py" not in _names(package_zip)


def test_zip_content_equals_the_sources(package_zip):
    with zipfile.ZipFile(package_zip) as archive:
        for name in archive.namelist():
            assert archive.read(name) == (PACKAGE_ROOT / name.removeprefix("spark_tables/")).read_bytes()


def test_no_shipped_module_imports_airflow(package_zip):
    with zipfile.ZipFile(package_zip) as archive:
        for name in archive.namelist():
            text = archive.read(name).decode("utf-8")
            assert "import airflow" not in text, name
            assert "from airflow" not in text, name


def test_building_again_reuses_the_zip_of_the_same_sources(tmp_path, package_zip):
    inode = os.stat(package_zip).st_ino
    job_package.cache_clear()

    again = job_package(str(tmp_path / "dist"))

    assert again == package_zip
    assert os.stat(again).st_ino == inode
    assert os.listdir(tmp_path / "dist") == [os.path.basename(package_zip)]


def test_a_zip_planted_under_the_package_s_name_is_replaced_not_shipped(tmp_path, package_zip):
    """Only bytes that hash to the name are shipped: a zip someone put there is written over with the sources."""
    original = Path(package_zip).read_bytes()
    with zipfile.ZipFile(package_zip, "w") as archive:
        archive.writestr("spark_tables/__init__.py", "import os; os.system('touch /tmp/owned')")
    job_package.cache_clear()

    again = job_package(str(tmp_path / "dist"))

    assert again == package_zip and Path(again).read_bytes() == original


def test_the_dist_folder_is_the_user_s_alone(tmp_path, package_zip):
    assert os.stat(tmp_path / "dist").st_mode & 0o777 == 0o700


def test_a_dist_folder_others_may_write_is_refused(tmp_path):
    shared = tmp_path / "shared_dist"
    shared.mkdir()
    shared.chmod(0o777)
    job_package.cache_clear()

    with pytest.raises(PermissionError) as caught:
        job_package(str(shared))

    assert str(caught.value).startswith(f"{shared} is not a folder of this user's that no one else may write")
    assert os.listdir(shared) == []


def test_calling_twice_returns_the_same_path(tmp_path):
    assert job_package(str(tmp_path / "dist")) == job_package(str(tmp_path / "dist"))


_IMPORT_FROM_ZIP = textwrap.dedent(
    """
    import importlib, importlib.abc, sys, zipfile

    class NoAirflow(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "airflow" or name.startswith("airflow."):
                raise ImportError("airflow is not installed on Spark executors")
            return None

    package_zip = sys.argv[1]
    sys.meta_path.insert(0, NoAirflow())
    sys.path.insert(0, package_zip)
    with zipfile.ZipFile(package_zip) as archive:
        modules = sorted(
            name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            for name in archive.namelist()
        )
    for name in modules:
        module = importlib.import_module(name)
        assert module.__file__.startswith(package_zip), (name, module.__file__)

    from spark_tables.core.job_spec import JobSpec
    from spark_tables.core.sql.job import SqlJob
    spec = JobSpec(job=SqlJob(statements=["SELECT 1"]), result_uri="file:///r.json", watch_pid=1)
    assert JobSpec.from_json(spec.to_json()) == spec
    print(len(modules))
    """
)


def test_every_shipped_module_imports_from_the_zip_without_airflow(package_zip):
    done = subprocess.run(
        [sys.executable, "-I", "-c", _IMPORT_FROM_ZIP, package_zip],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(_names(package_zip))
