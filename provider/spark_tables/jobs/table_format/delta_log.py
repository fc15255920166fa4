"""A Delta table's transaction log, read as files (Delta's protocol: ``_delta_log/<version, 20 digits>.json``, one
file per commit, a JSON action a line): a commit's ``commitInfo`` (operation, parameters, metrics) and ``txn``
actions (the idempotent writes' application ids and versions) are small files the job's side reads in milliseconds,
where Delta's ``DESCRIBE HISTORY`` takes a second in a new driver (docs/benchmarks.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spark_tables.jobs import files

_LOG = "_delta_log"


@dataclass(frozen=True)
class Commit:
    """One commit of a Delta table: its version, its ``commitInfo`` and its ``txn`` actions."""

    version: int
    info: dict[str, Any] = field(default_factory=dict)
    transactions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def operation(self) -> str | None:
        return self.info.get("operation")

    @property
    def metrics(self) -> dict[str, str]:
        return self.info.get("operationMetrics") or {}

    def count(self, metric: str) -> int | None:
        value = self.metrics.get(metric)
        return int(value) if value is not None else None


def commit(location: str, version: int) -> Commit | None:
    """The commit ``version`` of the table at ``location``; None when its file is not there (not yet made, or
    removed by the log's cleanup)."""
    try:
        text = files.read_text(f"{location.rstrip('/')}/{_LOG}/{version:020d}.json")
    except (FileNotFoundError, files.StorageUnreachable):
        return None
    actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    return Commit(
        version=version,
        info=next((action["commitInfo"] for action in actions if "commitInfo" in action), {}),
        transactions=[action["txn"] for action in actions if "txn" in action],
    )


def newest_version(location: str) -> int:
    """The version of the table's newest commit, from the names in its log; -1 when it has none."""
    names = files.list_names(f"{location.rstrip('/')}/{_LOG}")
    return max((int(name[:20]) for name in names if len(name) == 25 and name.endswith(".json")), default=-1)


def commits_after(location: str, version: int) -> list[Commit]:
    """The table's commits after ``version``, oldest first."""
    found = (commit(location, later) for later in range(version + 1, newest_version(location) + 1))
    return [made for made in found if made is not None]
