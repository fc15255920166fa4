"""FLIP-365's options, with its names: how long an idempotent operator's output may wait, and where it waits.

``execution.flush.max-interval`` turns buffering on: the latest output of each key is kept and emitted at most
once per interval (unset: every change goes out with its micro-batch, as without this capability).
``execution.flush.memory-buffer-only`` keeps the buffer in memory instead of the state store, bounded by
``state.backend.cache.max-entries-num`` entries (a full buffer flushes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.errors import SpecError

MAX_INTERVAL_OPTION = "execution.flush.max-interval"
MEMORY_BUFFER_ONLY_OPTION = "execution.flush.memory-buffer-only"
MAX_ENTRIES_OPTION = "state.backend.cache.max-entries-num"
#: The memory buffer's bound when the job does not set one.
DEFAULT_MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class FlushOptions:
    """Whether and how an idempotent operator's output is buffered: ``max_interval`` None means not at all."""

    max_interval: timedelta | None = None
    memory_buffer_only: bool = False
    max_entries: int = DEFAULT_MAX_ENTRIES

    @property
    def enabled(self) -> bool:
        return self.max_interval is not None

    @property
    def max_interval_ms(self) -> int:
        if self.max_interval is None:
            raise SpecError(f"{MAX_INTERVAL_OPTION} is not set: buffering is off")
        return whole_milliseconds(self.max_interval)

    @classmethod
    def from_configuration(cls, configuration: dict[str, Any]) -> FlushOptions:
        """The options a job's configuration sets; ``SpecError`` naming the first bad one."""
        interval = configuration.get(MAX_INTERVAL_OPTION)
        memory_only = _boolean(configuration.get(MEMORY_BUFFER_ONLY_OPTION, "false"), MEMORY_BUFFER_ONLY_OPTION)
        max_entries = _positive(configuration.get(MAX_ENTRIES_OPTION, DEFAULT_MAX_ENTRIES), MAX_ENTRIES_OPTION)
        if interval is None or str(interval).strip() == "":
            if memory_only or MAX_ENTRIES_OPTION in configuration:
                given = MEMORY_BUFFER_ONLY_OPTION if memory_only else MAX_ENTRIES_OPTION
                raise SpecError(f"{given} applies to buffered output: set {MAX_INTERVAL_OPTION} too, or leave it out")
            return cls()
        max_interval = parse_duration(interval, MAX_INTERVAL_OPTION)
        if not whole_milliseconds(max_interval):
            raise SpecError(
                f"{MAX_INTERVAL_OPTION}={interval!r} is too short: give at least 1 ms, or leave it unset for no "
                "buffering"
            )
        return cls(max_interval, memory_only, max_entries)


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise SpecError(f"{name}={value!r} is invalid: give true or false")
    return text == "true"


def _positive(value: Any, name: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise SpecError(f"{name}={value!r} is invalid: give a whole number of entries from 1")
    return int(text)
