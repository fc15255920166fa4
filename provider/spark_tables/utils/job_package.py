"""The code Spark drivers and executors import: ``spark_tables`` with ``core`` and ``jobs``, as a zip.

Built once per content (the zip's name carries a hash of the sources) and shipped with ``--py-files``, so
that job code and UDFs import on executors that do not have the provider installed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile

import spark_tables
from spark_tables.jobs.shipped_code import PACKAGE_ROOT, shipped_files, write_package

ENTRY_SCRIPT = str(PACKAGE_ROOT / "jobs" / "entry.py")


@functools.cache
def job_package(dist_folder: str) -> str:
    """Path of the zip for the current sources under ``dist_folder``, built if it is not there yet."""
    files = shipped_files()
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
        digest.update(path.read_bytes())
    target = os.path.join(dist_folder, f"spark_tables-{spark_tables.__version__}-{digest.hexdigest()[:12]}.zip")
    if os.path.isfile(target):
        return target
    os.makedirs(dist_folder, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(dir=dist_folder, suffix=".zip.tmp")
    with os.fdopen(fd, "wb") as handle:
        write_package(handle, files)
    os.replace(temp_path, target)
    return target
