"""Full-cache snapshots of a lookup table: versioned copies on disk, and the pointer that says which is current.

``<lookup root>/<name>/`` holds one folder per version (``v-<UTC time>-<random>``, parquet) and ``CURRENT.json``,
the pointer. A reload writes a new version folder whole, then replaces the pointer in one write: a reader that
reads the pointer sees the old snapshot or the new one, never a mix. The pointer also carries the load's times
(the reload schedule counts from them) and the table's load counters.
"""

from __future__ import annotations

import datetime
import re
import secrets
from dataclasses import asdict, dataclass
from typing import Any

POINTER = "CURRENT.json"
_VERSION = re.compile(r"v-\d{8}T\d{12}-[0-9a-f]{8}")


def snapshot_root(lookup_uri: str, name: str) -> str:
    """Where a lookup table's snapshots live: shared by every DAG that reads or reloads the table."""
    return f"{lookup_uri.rstrip('/')}/{name}"


def new_version(now: datetime.datetime) -> str:
    """A version name that sorts by creation time and never repeats."""
    return f"v-{now.astimezone(datetime.UTC):%Y%m%dT%H%M%S%f}-{secrets.token_hex(4)}"


def is_version(name: str) -> bool:
    return bool(_VERSION.fullmatch(name))


@dataclass(frozen=True)
class Snapshot:
    """The pointer's content: the current version and how its load went, and the table's counters so far.

    ``started``/``finished`` are ISO times of the load; ``scheduled_for`` the reload time it ran for (None for a
    first or manual load). ``loads`` and ``load_failures`` count every reload of the table, across tasks.
    """

    version: str
    location: str
    rows: int
    bytes: int
    started: str
    finished: str
    load_milliseconds: int
    scheduled_for: str | None = None
    loads: int = 1
    load_failures: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        return cls(**data)
