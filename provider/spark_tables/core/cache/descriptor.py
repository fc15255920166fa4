"""What a task registers for a cached table it wrote: FLIP-36's IntermediateResultId and its partition descriptors.

A descriptor names the copy (cache name, fingerprint of the definition, location, format, schema) and each of its
partitions (a file, with rows, bytes and a CRC-32 of its bytes), so a reader can prove the copy whole before
using it. It is the value of a registry XCom; ``written_at`` orders the copies a run holds of one cache.

A copy kept in a Spark Connect server's memory has no files: its location names the server's application and the
global temporary view cached there (``core.cache.layout.memory_location``), ``server`` the Spark connection that
reaches it, and its rows and bytes (the cached relation's size) are given whole.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from spark_tables.core.cache.table import FILES, MEMORY
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError

#: Marks a registry XCom value as a descriptor, with the version of its form.
DESCRIPTOR_TYPE = "spark_tables.cache_descriptor/1"
#: The file format of every copy: columnar, so a reader reads only the columns it needs.
COPY_FORMAT = "parquet"


@dataclass(frozen=True)
class CachePartition:
    """One file of a copy: its name under the copy's location, rows, bytes and the CRC-32 of its bytes."""

    file: str
    rows: int
    bytes: int
    crc32: int


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
        fields = {key: value for key, value in data.items() if key != "type"}
        try:
            return cls(
                **{
                    **fields,
                    "partitions": tuple(CachePartition(**p) for p in fields["partitions"]),
                    "owner": TableOwner.from_dict(fields["owner"]),
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
