"""Files on the Spark side, through fsspec: the exchange, plan files, cache copies, lookup snapshots, sink folders.

A location is a local path, a ``file:`` URI, or any URI fsspec reaches (``s3://``, ``gs://``, ``abfs://``,
``hdfs://``, ... with the file system's package installed where the job runs); Hadoop's ``s3a://`` and ``s3n://``,
as Spark names table locations and checkpoints, are read as ``s3://``. Every function takes a location and
resolves its file system, so callers never branch on the kind of storage.

``write_text`` and ``write_bytes`` replace a file whole: locally through a temporary file in the same folder, then
renamed over the target; on other storage (object stores) one put, which is atomic there.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid
import zlib
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from spark_tables.core.errors import JobError
from spark_tables.core.exchange import local_path
from spark_tables.core.object_storage import on_s3, s3fs_options
from spark_tables.core.storage_credentials import reached_by_spark


class StorageUnreachable(JobError):
    """No file system for a location: fsspec knows no such scheme, or its package is not installed."""


def filesystem(location: str) -> tuple[Any, str]:
    """The fsspec file system of ``location``, and its path there; S3's with the options of this environment."""
    path = local_path(location)
    url = path if path is not None else re.sub(r"^s3[an]://", "s3://", location)
    try:
        return fsspec.core.url_to_fs(url, **(s3fs_options(os.environ) if on_s3(location) else {}))
    except (ImportError, ValueError) as err:
        raise StorageUnreachable(
            f"cannot reach {location} ({err}): install the file system's package where the job runs "
            "(s3fs for s3:// and s3a://)"
        ) from None


def _name(entry: dict[str, Any]) -> str:
    return entry["name"].rstrip("/").rsplit("/", 1)[-1]


def _is_data(name: str) -> bool:
    """Spark's ``_SUCCESS``, checksums, staging folders and temporary files are not data."""
    return not name.startswith((".", "_"))


def _entries(folder: str) -> list[dict[str, Any]] | None:
    """The entries directly in ``folder`` (fsspec's details: name, type, size); None when it does not exist."""
    fs, path = filesystem(folder)
    fs.invalidate_cache(path)  # others (Spark) write here: a listing cached by an earlier call may be stale
    try:
        return fs.ls(path, detail=True)
    except FileNotFoundError:
        return None


@reached_by_spark
def exists(location: str) -> bool:
    fs, path = filesystem(location)
    fs.invalidate_cache(path)
    return bool(fs.exists(path))


@reached_by_spark
def is_file(location: str) -> bool:
    fs, path = filesystem(location)
    fs.invalidate_cache(path)
    return bool(fs.isfile(path))


@reached_by_spark
def list_names(folder: str) -> list[str]:
    """The names of the entries directly in ``folder``, sorted; none when it does not exist."""
    return sorted(_name(entry) for entry in _entries(folder) or [])


@reached_by_spark
def folder_names(folder: str) -> list[str]:
    """The names of the folders directly in ``folder``, sorted; none when it does not exist."""
    return sorted(_name(entry) for entry in _entries(folder) or [] if entry["type"] == "directory")


@reached_by_spark
def data_file_names(folder: str) -> list[str]:
    """The names of the data files directly in ``folder`` (not Spark's ``_SUCCESS``, checksums or hidden files),
    sorted; none when it does not exist."""
    entries = _entries(folder) or []
    return sorted(_name(entry) for entry in entries if entry["type"] == "file" and _is_data(_name(entry)))


@reached_by_spark
def file_sizes(folder: str) -> dict[str, int] | None:
    """Size of each file directly in ``folder``, by name; None when the folder does not exist."""
    entries = _entries(folder)
    if entries is None:
        return None
    return {_name(entry): entry["size"] for entry in entries if entry["type"] == "file"}


@reached_by_spark
def folder_bytes(folder: str) -> int:
    """Bytes of the data files under a folder, at any depth."""
    fs, path = filesystem(folder)
    fs.invalidate_cache(path)
    return sum(size for name, size in fs.du(path, total=False).items() if _is_data(name.rsplit("/", 1)[-1]))


@reached_by_spark
def crc32(location: str) -> int:
    """CRC-32 of a file's bytes, read here (as ``crc32`` of Spark's ``binaryFile`` content gives it)."""
    fs, path = filesystem(location)
    crc = 0
    with fs.open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


@reached_by_spark
def read_text(location: str) -> str:
    """The file's text (UTF-8); ``FileNotFoundError`` when there is none."""
    fs, path = filesystem(location)
    with fs.open(path, "r", encoding="utf-8") as handle:
        return handle.read()


@reached_by_spark
def read_bytes(location: str) -> bytes:
    """The file's bytes; ``FileNotFoundError`` when there is none."""
    fs, path = filesystem(location)
    with fs.open(path, "rb") as handle:
        return handle.read()


@reached_by_spark
def write_text(location: str, text: str) -> None:
    """Replace the file with ``text`` (UTF-8) whole: a reader sees the file before or after, never a part."""
    write_bytes(location, text.encode("utf-8"))


@reached_by_spark
def write_bytes(location: str, data: bytes) -> None:
    """Replace the file with ``data`` whole, its folder created if need be."""
    fs, path = filesystem(location)
    if not isinstance(fs, LocalFileSystem):
        fs.pipe_file(path, data)
        return
    folder, name = posixpath.split(path)
    fs.makedirs(folder, exist_ok=True)
    temporary = posixpath.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        fs.pipe_file(temporary, data)
        fs.mv(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            fs.rm_file(temporary)
        raise


@reached_by_spark
def create_exclusive(location: str, data: bytes) -> bool:
    """Create the file with ``data`` unless a file is there already; False if one was. Exclusive where storage can
    be: a local file is opened with ``O_EXCL``, an S3 object put with ``If-None-Match``; other stores check first."""
    fs, path = filesystem(location)
    try:
        if isinstance(fs, LocalFileSystem):
            fs.makedirs(posixpath.dirname(path), exist_ok=True)
            with fs.open(path, "xb") as handle:
                handle.write(data)
        else:
            fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    fs.invalidate_cache(posixpath.dirname(path))
    return True


def same_location(first: str, second: str) -> bool:
    """Whether two locations name one place: ``file:/x``, ``file:///x`` and ``/x`` are the same local folder, and
    ``s3a://b/x`` is ``s3://b/x``."""
    first_local, second_local = local_path(first), local_path(second)
    if first_local is not None and second_local is not None:
        return posixpath.normpath(first_local) == posixpath.normpath(second_local)
    if first_local is not None or second_local is not None:
        return False
    return re.sub(r"^s3[an]://", "s3://", first).rstrip("/") == re.sub(r"^s3[an]://", "s3://", second).rstrip("/")


@reached_by_spark
def move(source: str, target: str) -> None:
    """Move a file to ``target``, on the same storage."""
    fs, source_path = filesystem(source)
    fs.mv(source_path, filesystem(target)[1])


@reached_by_spark
def remove(location: str) -> None:
    """Delete a file, or a folder and what it holds, if it exists; any other failure to delete is raised."""
    fs, path = filesystem(location)
    with contextlib.suppress(FileNotFoundError):
        fs.rm(path, recursive=True)
    fs.invalidate_cache(path)


@reached_by_spark
def remove_named(folder: str, prefix: str) -> int:
    """Delete the entries directly in ``folder`` whose names start with ``prefix``; returns how many."""
    named = [entry["name"] for entry in _entries(folder) or [] if _name(entry).startswith(prefix)]
    fs, path = filesystem(folder)
    for entry in named:
        with contextlib.suppress(FileNotFoundError):
            fs.rm(entry, recursive=True)
    fs.invalidate_cache(path)
    return len(named)
