"""A Delta table's transaction log as files, read the same way by the Spark side (``jobs/table_format/delta_log.py``)
and the Airflow side (a lookup table's version check), each with its own storage functions. Delta's protocol:
``_delta_log/<version, 20 digits>.json``, one file per commit, a JSON action a line.

A commit's ``commitInfo`` (operation, parameters, metrics, Delta's ``txnId``) and ``txn`` actions (the idempotent
writes' application ids and versions) are in a small file read in milliseconds, where Delta's ``DESCRIBE HISTORY``
takes a second in a new driver (docs/benchmarks.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spark_tables.core.table_format.version import ListNames, ReadText

LOG = "_delta_log"
_DIGITS = 20


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

    @property
    def id(self) -> str:
        """The commit's own id: Delta's ``txnId`` (a UUID each commit writes), else its time and operation."""
        return str(self.info.get("txnId") or f"{self.info.get('timestamp')}:{self.operation}")


def log_folder(location: str) -> str:
    return f"{location.rstrip('/')}/{LOG}"


def commit_file(location: str, version: int) -> str:
    return f"{log_folder(location)}/{version:0{_DIGITS}d}.json"


def parse_commit(version: int, text: str) -> Commit:
    """A commit from its file's text."""
    actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    return Commit(
        version=version,
        info=next((action["commitInfo"] for action in actions if "commitInfo" in action), {}),
        transactions=[action["txn"] for action in actions if "txn" in action],
    )


def newest_commit(names: list[str]) -> int:
    """The newest commit's version among the names in a table's log; -1 when there is none."""
    return max(
        (int(name[:_DIGITS]) for name in names if len(name) == _DIGITS + 5 and name.endswith(".json")), default=-1
    )


def read_version(location: str, list_names: ListNames, read_text: ReadText) -> tuple[int, str] | None:
    """The number and id of the newest commit of the Delta table at ``location``, from its log's names and that
    commit's file; None when it has no commit there (no table, or not a Delta table)."""
    number = newest_commit(list_names(log_folder(location)))
    if number < 0:
        return None
    try:
        return number, parse_commit(number, read_text(commit_file(location, number))).id
    except FileNotFoundError:
        return None  # the table was dropped between the listing and the read
