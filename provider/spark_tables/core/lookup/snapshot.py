"""Full-cache snapshots of a lookup table: versioned copies on disk, and the pointer that says which is current.

``<lookup root>/<name>-<hash>/`` (``snapshot_root``) holds one folder per version (``v-<UTC time>-<random>``,
parquet) and ``CURRENT.json``, the pointer. A reload writes a new version folder whole, then replaces the pointer in
one write: a reader that reads the pointer sees the old snapshot or the new one, never a mix. The pointer also
carries the load's times (the reload schedule counts from them), the version of the table the snapshot holds (for a
table with versions: a reload copies only a version it does not hold), the table's load counters, and the reloads
failing since the last one that published (the schedule backs off from them).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.table_format.version import TableVersion

POINTER = "CURRENT.json"
#: A gauge not measured yet, as Flink reports it (``MetricNames``' UNINITIALIZED): ``latestLoadTime`` before any
#: load, which a 0 ms load could not be told from.
UNINITIALIZED = -1
_VERSION = re.compile(r"v-\d{8}T\d{12}-[0-9a-f]{8}")


def snapshot_root(lookup_uri: str, name: str, holds: Mapping[str, Any]) -> str:
    """Where a lookup table's snapshots live: ``<lookup root>/<name>-<hash of what they hold>``, shared by every DAG
    that reads or reloads the same rows (``holds``: the server, database, table, key and columns), and by no other:
    two DAGs' ``LookupTable("customers")`` on different databases keep snapshots, and a load lock, of their own."""
    text = json.dumps(holds, sort_keys=True, default=str)
    return f"{lookup_uri.rstrip('/')}/{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def new_version(now: datetime.datetime) -> str:
    """A version name that sorts by creation time and never repeats."""
    return f"v-{now.astimezone(datetime.UTC):%Y%m%dT%H%M%S%f}-{secrets.token_hex(4)}"


def is_version(name: str) -> bool:
    return bool(_VERSION.fullmatch(name))


@dataclass(frozen=True)
class Snapshot:
    """A published version and how its load went.

    ``started``/``finished`` are ISO times of the load; ``scheduled_for`` the reload time it ran for (None for a
    first or manual load); ``table_version`` the version of the table it copied (None: the table has no versions).
    """

    version: str
    location: str
    rows: int
    bytes: int
    started: str
    finished: str
    load_milliseconds: int
    scheduled_for: str | None = None
    table_version: TableVersion | None = None


@dataclass(frozen=True)
class FailedReloads:
    """The reloads that failed in a row since the last one that published: how many, and the latest's ISO times,
    the reload time it ran for and its error (one line)."""

    count: int
    started: str
    finished: str
    error: str
    scheduled_for: str | None = None


@dataclass(frozen=True)
class Pointer:
    """``CURRENT.json``: the snapshot joins read (None until a load first publishes one), the table's counters
    (``loads`` and ``load_failures`` count every load of the table, across tasks), and ``failing``, the reloads
    failing since the last one that published (None when it succeeded)."""

    current: Snapshot | None
    loads: int = 0
    load_failures: int = 0
    failing: FailedReloads | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def metrics(self) -> dict[str, Any]:
        """The FLIP's metrics of a full cache: the table's loads so far and what the current snapshot holds."""
        snapshot = self.current
        return {
            "loadCount": self.loads,
            "numLoadFailure": self.load_failures,
            "latestLoadTime": snapshot.load_milliseconds if snapshot else UNINITIALIZED,
            "numCachedRecords": snapshot.rows if snapshot else 0,
            "numCachedBytes": snapshot.bytes if snapshot else 0,
        }

    @classmethod
    def from_dict(cls, data: Any, root: str) -> Pointer:
        """The pointer of the lookup table whose snapshots are at ``root``, as read from its ``CURRENT.json``.

        The file is on storage others may write: its current snapshot must be one of the table's own version folders
        (``<root>/<version>``), never another folder a join would read; anything else raises ``SpecError``. The
        table version it records is only compared with the table's log, which the Airflow side lists at its
        location to tell whether a reload would copy anything new: a pointer written to name another table can at
        worst bring a reload on or put one off, as one written with other counts can.
        """
        where = f"lookup snapshots {root}: {POINTER}"
        try:
            current, failing = data.get("current"), data.get("failing")
            if current is not None and current.get("table_version") is not None:
                current = {**current, "table_version": TableVersion.from_dict(current["table_version"], where)}
            pointer = cls(
                current=Snapshot(**current) if current is not None else None,
                loads=data["loads"],
                load_failures=data["load_failures"],
                failing=FailedReloads(**failing) if failing is not None else None,
            )
        except (AttributeError, KeyError, TypeError) as err:
            raise SpecError(f"{where} is not a pointer ({err}): remove it, and reload the table") from None
        for count in (pointer.loads, pointer.load_failures):
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise SpecError(f"{where} has a count {count!r} that is not a whole number: remove it, and reload")
        snapshot = pointer.current
        if snapshot is not None and (
            not isinstance(snapshot.version, str)
            or not is_version(snapshot.version)
            or snapshot.location != f"{root.rstrip('/')}/{snapshot.version}"
        ):
            raise SpecError(
                f"{where} points at {snapshot.location!r}, which is not one of the table's snapshots "
                f"({root.rstrip('/')}/v-...): refused; remove it, and reload the table"
            )
        return pointer
