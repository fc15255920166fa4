"""Plan files, read and written by the driver: local paths, ``file://`` URIs, and object storage through fsspec
(``s3://`` and every scheme Airflow's ObjectStoragePath reaches; the driver needs the file system's package)."""

from __future__ import annotations

import os
import tempfile

from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import local_path


def plan_exists(uri: str) -> bool:
    path = local_path(uri)
    if path is not None:
        return os.path.isfile(path)
    fs, remote = _filesystem(uri)
    return bool(fs.exists(remote))


def read_plan_text(uri: str) -> str:
    """The plan file's text; ``SpecError`` naming the URI when there is none."""
    path = local_path(uri)
    try:
        if path is not None:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        fs, remote = _filesystem(uri)
        with fs.open(remote, "r", encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        raise SpecError(f"plan {uri} does not exist: compile it first (COMPILE PLAN '{uri}' FOR ...)") from None


def write_plan_text(uri: str, text: str) -> None:
    """Write the whole plan at once: a local file is replaced atomically; an object store writes whole objects."""
    path = local_path(uri)
    if path is None:
        fs, remote = _filesystem(uri)
        with fs.open(remote, "w", encoding="utf-8") as handle:
            handle.write(text)
        return
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(dir=folder, prefix=".plan-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temp_path, path)


def _filesystem(uri: str) -> tuple[object, str]:
    try:
        import fsspec
    except ImportError:
        raise SpecError(
            f"cannot reach plan {uri}: install fsspec and the file system's package on the driver"
        ) from None
    try:
        return fsspec.core.url_to_fs(uri)
    except (ImportError, ValueError) as err:
        raise SpecError(
            f"cannot reach plan {uri} ({err}): install the file system's package (s3fs for s3://)"
        ) from None
