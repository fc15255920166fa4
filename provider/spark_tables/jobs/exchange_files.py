"""The driver's side of the exchange: it reads its spec there when the spec is too long for a command line, and
writes its result there, atomically, so the Airflow side never sees half a result."""

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


def read_text(uri: str) -> str:
    path = local_path(uri)
    if path is not None:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    import fsspec  # a remote exchange: the driver needs fsspec and the file system's package, as for its result

    with fsspec.open(uri, "r", encoding="utf-8") as handle:
        return handle.read()
