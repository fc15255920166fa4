"""The files of cached tables under the cache root, through Airflow's object storage: marks, leases, sizes, removal.

Every operation tolerates what another task did meanwhile (a copy removed twice is removed once), and fails naming
the location when object storage has no credentials for it. Marks are written whole (``_write_whole``), so that a
task reading them never sees a part of one; one that is not what it should be is left out, never trusted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

import pendulum
from airflow.sdk import ObjectStoragePath

from spark_tables.core.cache.layout import LAST_USED, MEMORY_RECORD, READERS, RUN_MARKER, memory_copy_of
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.names import flat_name
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.hooks.object_storage import storage_path

log = logging.getLogger(__name__)

#: Depth of a copy folder below the cache root: <dag>/<run>/<cache>/<copy>.
_COPY_DEPTH = 4
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


@dataclass(frozen=True)
class Copy:
    """A copy folder: where, how many bytes its files take, and when a task last read it (ISO; "" while its writer has
    not registered it: still being written). For a copy kept in a server's memory, its record folder: ``memory`` is
    its location there, ``server`` the Spark connection that reaches it, and ``bytes`` what it takes in that memory.
    ``readers``: the tasks holding a lease on it (``lease``), which may be reading it now."""

    location: str
    bytes: int
    last_used: str
    memory: str = ""
    server: str = ""
    readers: tuple[TableOwner, ...] = ()


def _write_whole(path: ObjectStoragePath, text: str) -> None:
    """Replace the file with ``text`` whole, so that no reader sees a part: on local storage a temporary file beside
    it renamed over it; on object storage one put, which is whole already."""
    if path.protocol not in ("", "file", "local"):
        path.write_text(text)
        return
    folder = os.path.dirname(path.path)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path.path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


@reached_by_airflow
def remove(uri: str) -> None:
    """Remove a folder (a copy, a run's caches) and everything in it; nothing if it is gone already."""
    path = storage_path(uri)
    with contextlib.suppress(FileNotFoundError):
        path.fs.rm(path.path, recursive=True)


@reached_by_airflow
def mark_run(run_folder: str, dag_id: str, run_id: str) -> None:
    """Note which DAG run a run folder belongs to, for the sweep of runs that have ended or are gone."""
    marker = storage_path(run_folder) / RUN_MARKER
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        _write_whole(marker, json.dumps({"dag_id": dag_id, "run_id": run_id}))


@reached_by_airflow
def mark_used(location: str) -> None:
    """Record that a task read (or wrote) a copy now: least recently used copies are evicted first."""
    with contextlib.suppress(FileNotFoundError):  # evicted or released meanwhile: nothing to keep fresh
        _write_whole(storage_path(location) / LAST_USED, pendulum.now("UTC").isoformat())


@reached_by_airflow
def record_memory_copy(folder: str, location: str, server: str, size: int) -> None:
    """Make the record folder of a copy kept in a server's memory, used now."""
    path = storage_path(folder)
    path.mkdir(parents=True, exist_ok=True)
    _write_whole(path / MEMORY_RECORD, json.dumps({"location": location, "server": server, "bytes": size}))
    mark_used(folder)


@reached_by_airflow
def lease(location: str, reader: TableOwner) -> None:
    """Note, in a copy's folder (or a copy kept in memory's record folder), that ``reader``'s task may be reading it:
    eviction leaves a copy alone while a task holding a lease on it is not finished (``live_readers``)."""
    path = storage_path(location)
    if not path.exists():  # removed meanwhile: the job finds it gone, and falls back
        return
    (path / READERS).mkdir(parents=True, exist_ok=True)
    _write_whole(path / READERS / _lease_name(reader), json.dumps(dataclasses.asdict(reader)))


@reached_by_airflow
def release_lease(location: str, reader: TableOwner) -> None:
    with contextlib.suppress(FileNotFoundError):
        (storage_path(location) / READERS / _lease_name(reader)).unlink()


def _lease_name(reader: TableOwner) -> str:
    return flat_name([reader.dag_id, reader.run_id, reader.task_id, str(reader.map_index), str(reader.try_number)])


@reached_by_airflow
def runs(cache_root: str, dag_id: str | None = None) -> list[tuple[str, str, str]]:
    """``(dag_id, run_id, run folder)`` of every run with caches under the root, or only ``dag_id``'s."""
    root = storage_path(cache_root)
    dags = [root / flat_name([dag_id])] if dag_id is not None else _folders(root)
    found = []
    for dag_folder in dags:
        for run_folder in _folders(dag_folder):
            marker = run_folder / RUN_MARKER
            try:
                ids = json.loads(marker.read_text())
                found.append((ids["dag_id"], ids["run_id"], str(run_folder)))
            except FileNotFoundError:  # removed meanwhile, or not marked yet by the task that is making it
                continue
            except (ValueError, KeyError, TypeError) as err:
                log.warning(
                    "cache run folder %s: its marker %s is not a run's (%s): left out of the sweep; remove the "
                    "folder if its DAG run has ended",
                    run_folder,
                    RUN_MARKER,
                    err,
                )
    return found


@reached_by_airflow
def folder_names(uri: str) -> list[str]:
    """The names of the folders in a folder (the caches of a run folder, say); none if it does not exist."""
    return [folder.name for folder in _folders(storage_path(uri))]


@reached_by_airflow
def copies(cache_root: str) -> list[Copy]:
    """Every copy under the cache root, with its size and when it was last used."""
    root = storage_path(cache_root)
    if not root.exists():
        return []
    prefix = root.path.rstrip("/") + "/"
    sizes: dict[str, int] = {}
    used: dict[str, str] = {}
    kept: dict[str, dict[str, Any]] = {}
    readers: dict[str, list[TableOwner]] = {}
    for path, size in root.fs.du(root.path, total=False).items():
        parts = path[len(prefix) :].split("/")
        if len(parts) <= _COPY_DEPTH:
            continue  # a run marker
        location = f"{str(root).rstrip('/')}/{'/'.join(parts[:_COPY_DEPTH])}"
        sizes[location] = sizes.get(location, 0) + size
        inside = parts[_COPY_DEPTH:]
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile
            if inside == [LAST_USED]:
                used[location] = _last_used(storage_path(location) / LAST_USED)
            elif inside == [MEMORY_RECORD]:
                record = _memory_record(storage_path(location) / MEMORY_RECORD, parts[2], parts[3])
                if record is not None:
                    kept[location] = record
            elif len(inside) == 2 and inside[0] == READERS:
                reader = _lease(storage_path(location) / READERS / inside[1])
                readers.setdefault(location, []).extend([reader] if reader is not None else [])
    return [
        Copy(location, size, used.get(location, ""), readers=tuple(readers.get(location, ())))
        if location not in kept
        else Copy(
            location,
            kept[location]["bytes"],
            used.get(location, ""),
            **_held(kept[location]),
            readers=tuple(readers.get(location, ())),
        )
        for location, size in sizes.items()
    ]


def _last_used(path: ObjectStoragePath) -> str:
    """A copy's last use, ISO; "" (never evicted: taken for a copy still being written) when the mark is not a time."""
    text = path.read_text().strip()
    return text if _ISO_TIME.match(text) else ""


def _memory_record(path: ObjectStoragePath, cache_folder: str, view: str) -> dict[str, Any] | None:
    """The record of a copy kept in memory, in record folder ``<cache folder>/<view>``: None (left out: never released
    nor evicted, as a view it names could be any other on the server) unless it names that cache's view, as
    ``memory_view`` named it, on a server connection."""
    try:
        record = json.loads(path.read_text())
        held = {"location": str(record["location"]), "server": str(record["server"]), "bytes": int(record["bytes"])}
    except (ValueError, KeyError, TypeError) as err:
        log.warning("cache record %s is not a record of a copy kept in memory (%s): left out", path, err)
        return None
    name, _, fingerprint = cache_folder.rpartition("-")
    location = held["location"]
    if not memory_copy_of(name, fingerprint, location) or not location.endswith(f".{view}") or not held["server"]:
        log.warning("cache record %s names %r, not its own copy kept in memory: left out", path, location)
        return None
    return held


def _lease(path: ObjectStoragePath) -> TableOwner | None:
    try:
        return TableOwner.from_dict(json.loads(path.read_text()))
    except (ValueError, SpecError) as err:
        log.warning("cache lease %s names no task (%s): left out", path, err)
        return None


def _held(record: dict[str, Any]) -> dict[str, str]:
    return {"memory": record["location"], "server": record["server"]}


def least_recently_used(found: list[Copy], quota: int, keep: set[str]) -> list[Copy]:
    """The copies to evict, least recently used first, so that the others take at most ``quota`` bytes; never one
    in ``keep`` (by location: a folder, or a location in a server's memory: those tasks use, or hold leases on), nor
    one still being written (no last use yet)."""
    total = sum(copy.bytes for copy in found)
    evicted: list[Copy] = []
    for copy in sorted(found, key=lambda c: c.last_used):
        if total <= quota:
            break
        if copy.location in keep or copy.memory in keep or not copy.last_used:
            continue
        total -= copy.bytes
        evicted.append(copy)
    return evicted


@reached_by_airflow
def evict(found: list[Copy], quota: int, keep: set[str]) -> list[Copy]:
    """Remove least recently used copies on files of ``found``, never one in ``keep``, until those take at most
    ``quota`` bytes together (copies kept in a server's memory have a quota of their own: ``memory.evict``)."""
    keep = {str(storage_path(location)) for location in keep}
    evicted = least_recently_used([copy for copy in found if not copy.memory], quota, keep)
    for copy in evicted:
        remove(copy.location)
        log.info("over the quota: evicted %s (%d bytes, last used %s)", copy.location, copy.bytes, copy.last_used)
    return evicted


def _folders(path: ObjectStoragePath) -> list[ObjectStoragePath]:
    if not path.exists():
        return []
    return [child for child in path.iterdir() if child.is_dir()]
