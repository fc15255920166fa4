"""What a task registers for a cached table it wrote: FLIP-36's IntermediateResultId and its partition descriptors.

A descriptor names the copy (cache name, fingerprint of the definition, location, format, schema) and each of its
partitions (a file, with rows, bytes and a CRC-32 of its bytes), so a reader can prove the copy whole before
using it. It is the value of a registry XCom; ``written_at`` orders the copies a run holds of one cache.

A copy kept in a Spark Connect server's memory has no files: its location names the server's application and the
global temporary view cached there (``core.cache.layout.memory_location``), ``server`` the Spark connection that
reaches it, and its rows and bytes (the cached relation's size) are given whole.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any

from spark_tables.core.cache.layout import copy_folder_of, memory_copy_of, run_folder
from spark_tables.core.cache.table import FILES, MEMORY
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import PLAIN_NAME

#: Marks a registry XCom value as a descriptor, with the version of its form.
DESCRIPTOR_TYPE = "spark_tables.cache_descriptor/1"
#: The file format of every copy: columnar, so a reader reads only the columns it needs.
COPY_FORMAT = "parquet"
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
#: A partition's file: a plain name in the copy folder, as Spark names part files.
_PART_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=-]*")
#: An Airflow connection id (the Spark connection of a server that keeps a copy in memory).
_CONN_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")


class UntrustedDescriptor(SpecError):
    """A registry entry whose copy is not where its own task's copies are: never read, deleted or released."""


@dataclass(frozen=True)
class CachePartition:
    """One file of a copy: its name under the copy's location, rows, bytes and the CRC-32 of its bytes."""

    file: str
    rows: int
    bytes: int
    crc32: int

    def __post_init__(self) -> None:
        if not isinstance(self.file, str) or not _PART_FILE.fullmatch(self.file) or ".." in self.file:
            raise SpecError(f"cache descriptor: partition file {self.file!r} is not a file name of a copy folder")
        for name in ("rows", "bytes", "crc32"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(f"cache descriptor: partition {name} {value!r} is not a whole number")


@dataclass(frozen=True)
class CacheDescriptor:
    name: str
    fingerprint: str
    location: str
    format: str
    schema: str
    partitions: tuple[CachePartition, ...]
    owner: TableOwner
    written_at: str
    storage: str = FILES
    server: str = ""
    memory_rows: int = 0
    memory_bytes: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not PLAIN_NAME.fullmatch(self.name):
            raise SpecError(f"cache descriptor: name {self.name!r} is not a cache name")
        if not isinstance(self.fingerprint, str) or not _FINGERPRINT.fullmatch(self.fingerprint):
            raise SpecError(f"cache descriptor: fingerprint {self.fingerprint!r} is not sixteen hex digits")
        if self.storage not in (FILES, MEMORY) or self.format != (MEMORY if self.storage == MEMORY else COPY_FORMAT):
            raise SpecError(f"cache descriptor: storage {self.storage!r} in format {self.format!r} is not a copy's")
        for name in ("location", "schema", "written_at", "server"):
            if not isinstance(getattr(self, name), str):
                raise SpecError(f"cache descriptor: {name} must be a string")
        if self.server and not _CONN_ID.fullmatch(self.server):
            raise SpecError(f"cache descriptor: server {self.server!r} is not a connection id")
        if not isinstance(self.owner, TableOwner) or not isinstance(self.partitions, tuple):
            raise SpecError("cache descriptor: owner and partitions must be given as such")
        for name in ("memory_rows", "memory_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(f"cache descriptor: {name} {value!r} is not a whole number")

    def check_place(self, cache_root: str, dag_id: str, run_id: str, task_id: str, map_index: int | None) -> None:
        """Raise ``UntrustedDescriptor`` unless this is a copy of the registry XCom's own task: its owner is that task
        in that run, and its location is a copy folder that owner writes under ``<cache root>/<dag>/<run>/<cache>``
        (or a view it keeps in a server's memory for that cache). ``map_index`` None: any of the task's."""
        owner = self.owner
        task = (owner.dag_id, owner.run_id, owner.task_id)
        if task != (dag_id, run_id, task_id) or (map_index is not None and owner.map_index != map_index):
            raise UntrustedDescriptor(
                f"cache {self.name}: the registry XCom of {dag_id}.{task_id} (run {run_id}) names another task's "
                f"copy ({owner.describe()!r}): refused, and left alone"
            )
        if self.in_memory:
            placed = memory_copy_of(self.name, self.fingerprint, self.location)
        else:
            run = run_folder(cache_root, dag_id, run_id)
            placed = copy_folder_of(run, self.name, self.fingerprint, owner, self.location)
        if not placed:
            raise UntrustedDescriptor(
                f"cache {self.name}: the registry XCom of {owner.describe()} names {self.location!r}, which is not a "
                "copy that task writes under the cache root: refused, and left alone"
            )

    @property
    def in_memory(self) -> bool:
        return self.storage == MEMORY

    @property
    def rows(self) -> int:
        return self.memory_rows if self.in_memory else sum(p.rows for p in self.partitions)

    @property
    def bytes(self) -> int:
        return self.memory_bytes if self.in_memory else sum(p.bytes for p in self.partitions)

    def describe(self) -> str:
        held = "in memory" if self.in_memory else f"in {len(self.partitions)} partitions"
        return (
            f"{self.name} at {self.location} ({self.rows:,} rows, {self.bytes:,} bytes {held}), written by "
            f"{self.owner.describe()}"
        )

    def to_dict(self) -> dict[str, Any]:
        """As a JSON object (lists, not tuples: Airflow validates XCom values as JSON)."""
        data = asdict(self)
        return {"type": DESCRIPTOR_TYPE, **data, "partitions": list(data["partitions"])}

    @classmethod
    def from_dict(cls, data: Any) -> CacheDescriptor:
        if not is_descriptor(data):
            raise SpecError("cache descriptor: not a descriptor object; was it written by another provider version?")
        given = {key: value for key, value in data.items() if key != "type"}
        known = {f.name for f in fields(cls)}
        if not set(given) <= known or not isinstance(given.get("partitions"), list):
            raise SpecError(f"cache descriptor: malformed (fields {sorted(given)}, not those of a descriptor)")
        try:
            return cls(
                **{
                    **given,
                    "partitions": tuple(CachePartition(**p) for p in given["partitions"]),
                    "owner": TableOwner.from_dict(given["owner"]),
                }
            )
        except (KeyError, TypeError) as err:
            raise SpecError(f"cache descriptor: malformed ({err})") from None


def is_descriptor(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") == DESCRIPTOR_TYPE


def descriptor_of_copy(
    name: str, fingerprint: str, report: dict[str, Any], owner: TableOwner, written_at: str, server: str = ""
) -> CacheDescriptor | None:
    """The descriptor of the copy a job reports it wrote (``report["written"]``), or None if it wrote none;
    ``server``: the Spark connection of the task, which reaches a copy kept in memory."""
    written = report.get("written")
    if not written:
        return None
    common = {"name": name, "fingerprint": fingerprint, "location": report["location"], "schema": written["schema"]}
    if written.get("storage") == MEMORY:
        held = {"memory_rows": written["rows"], "memory_bytes": written["bytes"]}
        return CacheDescriptor(
            **common,
            format=MEMORY,
            partitions=(),
            owner=owner,
            written_at=written_at,
            storage=MEMORY,
            server=server,
            **held,
        )
    partitions = tuple(CachePartition(**p) for p in written["partitions"])
    return CacheDescriptor(**common, format=COPY_FORMAT, partitions=partitions, owner=owner, written_at=written_at)
