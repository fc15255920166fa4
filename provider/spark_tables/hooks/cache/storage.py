"""The files of cached tables under the cache root, through Airflow's object storage: marks, sizes, removal.

Every operation tolerates what another task did meanwhile (a copy removed twice is removed once), and fails naming
the location when object storage has no credentials for it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import pendulum
from airflow.sdk import ObjectStoragePath

from spark_tables.core.cache.layout import LAST_USED, MEMORY_RECORD, RUN_MARKER
from spark_tables.core.names import flat_name
from spark_tables.core.storage_credentials import reached_by_airflow

log = logging.getLogger(__name__)

#: Depth of a copy folder below the cache root: <dag>/<run>/<cache>/<copy>.
_COPY_DEPTH = 4


@dataclass(frozen=True)
class Copy:
    """A copy folder: where, how many bytes its files take, and when a task last read it (ISO; "" if unknown). For a
    copy kept in a server's memory, its record folder: ``memory`` is its location there, ``server`` the Spark
    connection that reaches it, and ``bytes`` what it takes in that memory."""

    location: str
    bytes: int
    last_used: str
    memory: str = ""
    server: str = ""


@reached_by_airflow
def remove(uri: str) -> None:
    """Remove a folder (a copy, a run's caches) and everything in it; nothing if it is gone already."""
    path = ObjectStoragePath(uri)
    with contextlib.suppress(FileNotFoundError):
        path.fs.rm(path.path, recursive=True)


@reached_by_airflow
def mark_run(run_folder: str, dag_id: str, run_id: str) -> None:
    """Note which DAG run a run folder belongs to, for the sweep of runs that have ended or are gone."""
    marker = ObjectStoragePath(run_folder) / RUN_MARKER
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"dag_id": dag_id, "run_id": run_id}))


@reached_by_airflow
def mark_used(location: str) -> None:
    """Record that a task read (or wrote) a copy now: least recently used copies are evicted first."""
    with contextlib.suppress(FileNotFoundError):  # evicted or released meanwhile: nothing to keep fresh
        (ObjectStoragePath(location) / LAST_USED).write_text(pendulum.now("UTC").isoformat())


@reached_by_airflow
def record_memory_copy(folder: str, location: str, server: str, size: int) -> None:
    """Make the record folder of a copy kept in a server's memory, used now."""
    path = ObjectStoragePath(folder)
    path.mkdir(parents=True, exist_ok=True)
    (path / MEMORY_RECORD).write_text(json.dumps({"location": location, "server": server, "bytes": size}))
    mark_used(folder)


@reached_by_airflow
def runs(cache_root: str, dag_id: str | None = None) -> list[tuple[str, str, str]]:
    """``(dag_id, run_id, run folder)`` of every run with caches under the root, or only ``dag_id``'s."""
    root = ObjectStoragePath(cache_root)
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
    return [folder.name for folder in _folders(ObjectStoragePath(uri))]


@reached_by_airflow
def copies(cache_root: str) -> list[Copy]:
    """Every copy under the cache root, with its size and when it was last used."""
    root = ObjectStoragePath(cache_root)
    if not root.exists():
        return []
    prefix = root.path.rstrip("/") + "/"
    sizes: dict[str, int] = {}
    used: dict[str, str] = {}
    kept: dict[str, dict[str, Any]] = {}
    for path, size in root.fs.du(root.path, total=False).items():
        parts = path[len(prefix) :].split("/")
        if len(parts) <= _COPY_DEPTH:
            continue  # a run marker
        location = f"{str(root).rstrip('/')}/{'/'.join(parts[:_COPY_DEPTH])}"
        sizes[location] = sizes.get(location, 0) + size
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile
            if parts[_COPY_DEPTH:] == [LAST_USED]:
                used[location] = (ObjectStoragePath(location) / LAST_USED).read_text().strip()
            elif parts[_COPY_DEPTH:] == [MEMORY_RECORD]:
                kept[location] = json.loads((ObjectStoragePath(location) / MEMORY_RECORD).read_text())
    return [
        Copy(location, size, used.get(location, ""))
        if location not in kept
        else Copy(location, kept[location]["bytes"], used.get(location, ""), **_held(kept[location]))
        for location, size in sizes.items()
    ]


def _held(record: dict[str, Any]) -> dict[str, str]:
    return {"memory": record["location"], "server": record["server"]}


def least_recently_used(found: list[Copy], quota: int, keep: set[str]) -> list[Copy]:
    """The copies to evict, least recently used first, so that the others take at most ``quota`` bytes; never one
    in ``keep`` (by location: a folder, or a location in a server's memory)."""
    total = sum(copy.bytes for copy in found)
    evicted: list[Copy] = []
    for copy in sorted(found, key=lambda c: c.last_used):
        if total <= quota:
            break
        if copy.location in keep or copy.memory in keep:
            continue
        total -= copy.bytes
        evicted.append(copy)
    return evicted


@reached_by_airflow
def evict(found: list[Copy], quota: int, keep: set[str]) -> list[Copy]:
    """Remove least recently used copies on files of ``found``, never one in ``keep``, until those take at most
    ``quota`` bytes together (copies kept in a server's memory have a quota of their own: ``memory.evict``)."""
    keep = {str(ObjectStoragePath(location)) for location in keep}
    evicted = least_recently_used([copy for copy in found if not copy.memory], quota, keep)
    for copy in evicted:
        remove(copy.location)
        log.info("over the quota: evicted %s (%d bytes, last used %s)", copy.location, copy.bytes, copy.last_used)
    return evicted


def _folders(path: ObjectStoragePath) -> list[ObjectStoragePath]:
    if not path.exists():
        return []
    return [child for child in path.iterdir() if child.is_dir()]
