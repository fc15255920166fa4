"""A table's version, as a format with a log of its commits tells it without reading the table's data.

Delta Lake numbers its commits; the number alone does not say which table it counts, since a table dropped and made
anew at the same location starts again from 0. So a version is the newest commit's number and that commit's own id,
with the table's location (where its log is) and its format (which reads the log): what a lookup table's full-cache
snapshot records of the version it holds, and what the Airflow side compares to the log, cheaply, to tell whether
the table changed since.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from spark_tables.core.errors import SpecError

#: How a format's log is read where it lives: the names in a folder (none when it is not there), a file's text.
ListNames = Callable[[str], list[str]]
ReadText = Callable[[str], str]


@dataclass(frozen=True)
class TableVersion:
    """Version ``number`` of the ``format`` table at ``location``, made by the commit whose id is ``commit``."""

    format: str
    location: str
    number: int
    commit: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> TableVersion:
        """A version as a pointer or an event carries it; anything else fails naming ``where``."""
        if isinstance(data, TableVersion):
            return data
        fields = {"format", "location", "number", "commit"}
        if not isinstance(data, dict) or set(data) != fields:
            raise SpecError(f"{where}: a table version must be an object with {', '.join(sorted(fields))}")
        version = cls(**data)
        if not all(isinstance(getattr(version, name), str) and getattr(version, name) for name in fields - {"number"}):
            raise SpecError(f"{where}: a table version's format, location and commit must be non-empty text")
        if isinstance(version.number, bool) or not isinstance(version.number, int) or version.number < 0:
            raise SpecError(f"{where}: a table version's number {version.number!r} is not a whole number")
        return version

    def describe(self) -> str:
        return f"version {self.number} of {self.format} table {self.location}"
