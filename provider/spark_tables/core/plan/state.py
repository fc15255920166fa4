"""A stateful node's ``state`` entries (FLIP-292's ``StateMetadata``): one per input, each with its own TTL.

``[{"index": 0, "ttl": "3600000 ms", "name": "leftState"}, {"index": 1, "ttl": "0 ms", "name": "rightState"}]``:
input ``index`` keeps its state for ``ttl`` after it was last written; ``"0 ms"`` means it never expires. The
compiler writes the job's ``table.exec.state.ttl`` into every entry (a ``STATE_TTL`` hint overrides it); a person
edits one entry to change one operator's, or one join side's, retention alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from spark_tables.core.durations import format_duration, parse_duration, whole_milliseconds
from spark_tables.core.errors import SpecError

#: The job-level option whose value is every stateful node's default TTL, as in Flink.
STATE_TTL_OPTION = "table.exec.state.ttl"


@dataclass(frozen=True)
class StateEntry:
    """The state a node keeps for its input ``index``, kept ``ttl`` after its last write (zero: for ever)."""

    index: int
    ttl: timedelta
    name: str

    @property
    def ttl_ms(self) -> int:
        return whole_milliseconds(self.ttl)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "ttl": format_duration(self.ttl), "name": self.name}


def default_ttl(configuration: dict[str, Any]) -> timedelta:
    """The job's ``table.exec.state.ttl`` (Flink's default: 0, no expiry)."""
    value = configuration.get(STATE_TTL_OPTION, 0)
    return parse_duration(value, STATE_TTL_OPTION)


def default_entries(names: tuple[str, ...], ttl: timedelta) -> tuple[StateEntry, ...]:
    """One entry per input, named by the node type, all with ``ttl``."""
    return tuple(StateEntry(index, ttl, name) for index, name in enumerate(names))


def parse_entries(data: Any, names: tuple[str, ...], where: str) -> tuple[StateEntry, ...]:
    """A node's ``state`` as written in a plan, checked against the node's inputs (``names``, one per input).

    Entries must be one per input with indices 0, 1, ... each once; a two-input node (a join) may have a single
    entry, which then applies to both inputs, as Flink reads older plans.
    """
    if not isinstance(data, list) or not data:
        raise SpecError(f"{where}: state must be a non-empty list of {{index, ttl, name}} entries, or be left out")
    entries: dict[int, StateEntry] = {}
    for position, item in enumerate(data):
        entry = _parse_entry(item, f"{where}: state entry {position}")
        if entry.index in entries:
            raise SpecError(f"{where}: state index {entry.index} is given twice: give each input one entry")
        entries[entry.index] = entry
    if len(entries) == 1 and len(names) == 2 and 0 in entries:
        only = entries[0]
        return (only, StateEntry(1, only.ttl, names[1]))
    if len(entries) != len(names):
        raise SpecError(
            f"{where}: {len(entries)} state entries for {len(names)} input(s): give one entry per input "
            f"(index 0 to {len(names) - 1})"
        )
    if sorted(entries) != list(range(len(names))):
        raise SpecError(
            f"{where}: state indices {sorted(entries)} are not 0 to {len(names) - 1}: number the inputs from 0 "
            "without gaps"
        )
    return tuple(entries[index] for index in range(len(names)))


def _parse_entry(item: Any, where: str) -> StateEntry:
    if not isinstance(item, dict) or not {"index", "ttl"} <= set(item):
        raise SpecError(f"{where}: must be an object with index, ttl and name")
    unknown = sorted(set(item) - {"index", "ttl", "name"})
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {unknown}: use index, ttl and name")
    index = item["index"]
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise SpecError(f"{where}: index {index!r} is invalid: use the input's number, from 0")
    ttl = parse_duration(item["ttl"], f"{where}: ttl")
    name = item.get("name", f"state{index}")
    if not isinstance(name, str) or not name:
        raise SpecError(f"{where}: name {name!r} is invalid: name the state, or leave the name out")
    return StateEntry(index, ttl, name)
