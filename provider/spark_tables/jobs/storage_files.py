"""Folders on storage, from the driver: list, measure, remove. They are named by URIs or Hadoop locations, as
Spark writes them. Local paths go through ``os``; other URIs through fsspec (the driver then needs fsspec and the
file system's package, as for the exchange)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import zlib
from typing import Any

from spark_tables.core.exchange import local_path


def fsspec_url(location: str) -> str:
    """A Hadoop location as fsspec reads it: ``file:/x`` is a local path, ``s3a://`` is ``s3://``."""
    if location.startswith("file:"):
        return "/" + location[len("file:") :].lstrip("/")
    return re.sub(r"^s3[an]://", "s3://", location)


def _filesystem(uri: str) -> tuple[Any, str]:
    import fsspec

    return fsspec.core.url_to_fs(fsspec_url(uri))


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


def file_sizes(folder: str) -> dict[str, int] | None:
    """Size of each file directly in ``folder``, by name; None when the folder does not exist."""
    path = local_path(folder)
    if path is not None:
        if not os.path.isdir(path):
            return None
        return {entry.name: entry.stat().st_size for entry in os.scandir(path) if entry.is_file()}
    fs, remote = _filesystem(folder)
    if not fs.exists(remote):
        return None
    return {
        entry["name"].rstrip("/").rsplit("/", 1)[-1]: entry["size"]
        for entry in fs.ls(remote, detail=True)
        if entry["type"] == "file"
    }


def file_crc32(uri: str) -> int:
    """CRC-32 of a file's bytes, read here (as ``crc32`` of Spark's ``binaryFile`` content gives it)."""
    path = local_path(uri)
    if path is not None:
        opened = open(path, "rb")  # noqa: SIM115 (closed by the with below, for both kinds of file)
    else:
        fs, remote = _filesystem(uri)
        opened = fs.open(remote, "rb")
    crc = 0
    with opened as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


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
    """Delete a folder and what it holds, if it exists; any other failure to delete is raised."""
    path = local_path(uri)
    with contextlib.suppress(FileNotFoundError):
        if path is not None:
            shutil.rmtree(path)
        else:
            fs, remote = _filesystem(uri)
            fs.rm(remote, recursive=True)
