"""Which task try created a table: the marks a CTAS leaves in its table's properties, and the names it derives.

The marks are how cleanup proves a table is its own before it drops anything: a table without them, or with
another task's, is never dropped. They stay on the finished table as a record of where it came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier


class TaskTry(Protocol):
    """What a task instance says of the try it runs (the Task SDK's ``RuntimeTaskInstanceProtocol`` has it)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int | None
    try_number: int


PREFIX = "spark_tables.ctas."
#: ``filling`` from creation until the rows are all written, then ``complete``.
STATE = PREFIX + "state"
FILLING, COMPLETE = "filling", "complete"
#: On a staging table: the final name it becomes, and (for a replace) the name the old table is moved to.
TARGET = PREFIX + "target"
REPLACED = PREFIX + "replaced"
#: On a table a replace made in place (a format that keeps versions): the version it replaced, which an undone
#: replace restores.
REPLACED_VERSION = PREFIX + "replaced_version"
#: On a table created at an explicit LOCATION: that location, claimed by the task (``LOCATION_CLAIM``). The files
#: of a table this task made are removed only where this mark and the claim both say the location is the task's.
LOCATION = PREFIX + "location"
#: The claim a CTAS writes in an explicit LOCATION before it creates its table there (once: the first writer wins),
#: naming the table and the task; Spark's readers skip it (a leading ``_``), and it stays as the folder's record.
LOCATION_CLAIM = "_spark_tables_claim.json"
_IDENTITY = ("dag_id", "run_id", "task_id", "map_index")


@dataclass(frozen=True)
class TableOwner:
    """A task (dag, run, task, map index) and which of its tries; every try of a task owns its leftovers."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int = 1

    def __post_init__(self) -> None:
        for name in ("dag_id", "run_id", "task_id"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise SpecError(f"ctas job: owner {name} must be a non-empty string")
        for name in ("map_index", "try_number"):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), int):
                raise SpecError(f"ctas job: owner {name} must be a whole number")

    @classmethod
    def from_dict(cls, data: Any) -> TableOwner:
        if isinstance(data, TableOwner):
            return data
        fields = {*_IDENTITY, "try_number"}
        if not isinstance(data, dict) or not {"dag_id", "run_id", "task_id"} <= set(data) or not set(data) <= fields:
            raise SpecError("ctas job: owner must be an object with dag_id, run_id, task_id, map_index, try_number")
        return cls(**data)

    @classmethod
    def of_task_instance(cls, ti: TaskTry) -> TableOwner:
        """The try an Airflow task instance is running."""
        return cls(
            dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, map_index=ti.map_index, try_number=ti.try_number
        )

    def properties(self, state: str) -> dict[str, str]:
        """The marks written on a table this try creates."""
        marks = {PREFIX + name: str(getattr(self, name)) for name in _IDENTITY}
        return {**marks, PREFIX + "try_number": str(self.try_number), STATE: state}

    def is_same_task(self, properties: dict[str, str]) -> bool:
        """Whether a table's properties say a try of this task (this one or an earlier one) created it."""
        return all(properties.get(PREFIX + name) == str(getattr(self, name)) for name in _IDENTITY)

    def made(self, properties: dict[str, str] | None, *, up_to_try: int | None = None) -> bool:
        """Whether a try of this task made the table with these properties, one no later than ``up_to_try`` if
        given (a cleanup from outside must not undo a retry at work)."""
        if properties is None or not self.is_same_task(properties):
            return False
        made_by = owner_try(properties)
        return up_to_try is None or not made_by.isdigit() or int(made_by) <= up_to_try

    def task_digest(self) -> str:
        """Ten hex digits naming this task, the same for every try, so a retry finds what earlier tries left."""
        text = "\0".join(str(getattr(self, name)) for name in _IDENTITY)
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def task(self) -> dict[str, Any]:
        """The task's identity, as a claim records it: dag, run, task and map index."""
        return {name: getattr(self, name) for name in _IDENTITY}

    def describe(self) -> str:
        map_part = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}.{self.task_id}{map_part} of run {self.run_id}, try {self.try_number}"


def staging_table(target: TableIdentifier, owner: TableOwner) -> TableIdentifier:
    """Where a staging CTAS writes before its table takes the final name: beside it, in the same database."""
    return TableIdentifier((*target.parts[:-1], f"{target.table}__staging_{owner.task_digest()}"))


def replaced_table(target: TableIdentifier, owner: TableOwner) -> TableIdentifier:
    """Where a replace moves the old table for the instant of the swap, until the new one has its name."""
    return TableIdentifier((*target.parts[:-1], f"{target.table}__replaced_{owner.task_digest()}"))


def owner_try(properties: dict[str, str]) -> str:
    return properties.get(PREFIX + "try_number", "?")
