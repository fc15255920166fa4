"""Folders on storage, from the driver: list, measure, remove. Local paths go through ``os``; other URIs through
fsspec (the driver then needs fsspec and the file system's package, as for the exchange)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from spark_tables.core.exchange import local_path


def _filesystem(uri: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(uri)


def _is_data(name: str) -> bool:
    """Spark's ``_SUCCESS``, checksums and temporary files are not data."""
    return not name.rsplit("/", 1)[-1].startswith((".", "_"))


def list_names(folder: str) -> list[str]:
    """The names of the entries directly in ``folder``, sorted; none when it does not exist."""
    path = local_path(folder)
    if path is not None:
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    fs, remote = _filesystem(folder)
    if not fs.exists(remote):
        return []
    return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(remote, detail=False))


def folder_bytes(folder: str) -> int:
    """Bytes of the data files under a folder."""
    path = local_path(folder)
    if path is not None:
        return sum(
            os.path.getsize(os.path.join(parent, name))
            for parent, _, names in os.walk(path)
            for name in names
            if _is_data(name)
        )
    fs, remote = _filesystem(folder)
    return sum(size for name, size in fs.du(remote, total=False).items() if _is_data(name))


def remove(uri: str) -> None:
    """Delete a folder and what it holds, if it exists."""
    path = local_path(uri)
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
        return
    fs, remote = _filesystem(uri)
    if fs.exists(remote):
        fs.rm(remote, recursive=True)
