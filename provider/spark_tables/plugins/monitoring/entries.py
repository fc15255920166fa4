"""The XComs the monitoring pages read: one entry as the routes hand it over, and the key of a task's result."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The XCom key of a task's result.
RETURN_VALUE = "return_value"


@dataclass(frozen=True)
class XComEntry:
    """One XCom of a DAG run, its value as stored (JSON)."""

    task_id: str
    map_index: int
    key: str
    value: Any
