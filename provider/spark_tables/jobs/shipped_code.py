"""This provider's code as Spark's Python processes import it where the provider is not installed: ``spark_tables``
with ``core`` and ``jobs``, as a zip. spark-submit ships it with ``--py-files``; in session mode the task ships it as
its session's Python files (for executors' workers) and inside each foreachBatch function (``server_python``).
"""

from __future__ import annotations

import functools
import io
import zipfile
from pathlib import Path
from typing import BinaryIO

import spark_tables

PACKAGE_ROOT = Path(spark_tables.__file__).parent
SHIPPED_PACKAGES = ("core", "jobs")


def shipped_files() -> list[Path]:
    """The source files the zip holds, in a stable order."""
    files = [PACKAGE_ROOT / "__init__.py"]
    for package in SHIPPED_PACKAGES:
        files += sorted((PACKAGE_ROOT / package).rglob("*.py"))
    return files


def write_package(handle: BinaryIO, files: list[Path]) -> None:
    """Write the zip of ``files`` (``shipped_files``') into ``handle``, each under ``spark_tables/``."""
    with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, str(Path("spark_tables") / path.relative_to(PACKAGE_ROOT)))


@functools.cache
def package_bytes() -> bytes:
    """The zip of the current sources, in memory."""
    buffer = io.BytesIO()
    write_package(buffer, shipped_files())
    return buffer.getvalue()
