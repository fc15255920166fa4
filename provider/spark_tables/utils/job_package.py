"""The code Spark drivers and executors import: ``spark_tables`` with ``core`` and ``jobs``, as a zip.

Built once per content (the zip's name carries a hash of the sources) and shipped with ``--py-files``, so
that job code and UDFs import on executors that do not have the provider installed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

import spark_tables

PACKAGE_ROOT = Path(spark_tables.__file__).parent
SHIPPED_PACKAGES = ("core", "jobs")
ENTRY_SCRIPT = str(PACKAGE_ROOT / "jobs" / "entry.py")


def _shipped_files() -> list[Path]:
    files = [PACKAGE_ROOT / "__init__.py"]
    for package in SHIPPED_PACKAGES:
        files += sorted((PACKAGE_ROOT / package).rglob("*.py"))
    return files


@functools.cache
def job_package(dist_folder: str) -> str:
    """Path of the zip for the current sources under ``dist_folder``, built if it is not there yet."""
    files = _shipped_files()
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
        digest.update(path.read_bytes())
    target = os.path.join(dist_folder, f"spark_tables-{spark_tables.__version__}-{digest.hexdigest()[:12]}.zip")
    if os.path.isfile(target):
        return target
    os.makedirs(dist_folder, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(dir=dist_folder, suffix=".zip.tmp")
    with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, str(Path("spark_tables") / path.relative_to(PACKAGE_ROOT)))
    os.replace(temp_path, target)
    return target
