"""The code Spark drivers and executors import: ``spark_tables`` with ``core`` and ``jobs``, as a zip.

Built in memory once a process, and kept on disk under the name of its bytes' hash, in a folder only this user may
write (``core.private_files``); a zip found there is used only when its bytes hash to its name. Shipped with
``--py-files``, so that job code and UDFs import on executors that do not have the provider installed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import spark_tables
from spark_tables.core.private_files import private_folder
from spark_tables.jobs.shipped_code import PACKAGE_ROOT, package_bytes

ENTRY_SCRIPT = str(PACKAGE_ROOT / "jobs" / "entry.py")


@functools.cache
def job_package(dist_folder: str) -> str:
    """Path of the zip of the current sources under ``dist_folder``, written there unless the same bytes are."""
    data = package_bytes()
    digest = hashlib.sha256(data).hexdigest()
    folder = private_folder(dist_folder)
    target = os.path.join(folder, f"spark_tables-{spark_tables.__version__}-{digest[:16]}.zip")
    if os.path.isfile(target) and hashlib.sha256(Path(target).read_bytes()).hexdigest() == digest:
        return target
    fd, temp_path = tempfile.mkstemp(dir=folder, suffix=".zip.tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temp_path, target)
    return target
