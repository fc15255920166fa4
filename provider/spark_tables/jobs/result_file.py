"""Writes the job result where the Airflow side reads it: atomically, so it never sees half a result."""

from __future__ import annotations

import os
import tempfile

from spark_tables.core.exchange import local_path


def write_result(uri: str, text: str) -> None:
    path = local_path(uri)
    if path is None:
        _write_remote(uri, text)
        return
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, temp_path = tempfile.mkstemp(dir=folder, prefix=".result-", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temp_path, path)


def _write_remote(uri: str, text: str) -> None:
    """Object stores write a whole object at once; fsspec reaches every scheme Airflow's object storage does."""
    try:
        import fsspec
    except ImportError:
        raise RuntimeError(
            f"cannot write the job result to {uri}: install fsspec and the file system's package on the Spark "
            "driver, or set [spark_tables] exchange_uri to a local folder (client mode)"
        ) from None
    with fsspec.open(uri, "w", encoding="utf-8") as handle:
        handle.write(text)
