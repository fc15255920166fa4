"""What a task registers for a cached table it wrote: FLIP-36's IntermediateResultId and its partition descriptors.

A descriptor names the copy (cache name, fingerprint of the definition, location, format, schema) and each of its
partitions (a file, with rows, bytes and a CRC-32 of its bytes), so a reader can prove the copy whole before
using it. It is the value of a registry XCom; ``written_at`` orders the copies a run holds of one cache.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

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

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    def describe(self) -> str:
        return (
            f"{self.name} at {self.location} ({self.rows:,} rows, {self.bytes:,} bytes in {len(self.partitions)} "
            f"partitions), written by {self.owner.describe()}"
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
    name: str, fingerprint: str, report: dict[str, Any], owner: TableOwner, written_at: str
) -> CacheDescriptor | None:
    """The descriptor of the copy a job reports it wrote (``report["written"]``), or None if it wrote none."""
    written = report.get("written")
    if not written:
        return None
    return CacheDescriptor(
        name=name,
        fingerprint=fingerprint,
        location=report["location"],
        format=COPY_FORMAT,
        schema=written["schema"],
        partitions=tuple(CachePartition(**p) for p in written["partitions"]),
        owner=owner,
        written_at=written_at,
    )
