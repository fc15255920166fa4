"""A task instance's state, as the Task SDK gives it to a task (``ti.get_task_states``) or to a trigger."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_tables.core.ctas.ownership import TableOwner

#: Task states in which no try of the task runs or will run again without being cleared.
FINISHED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


def task_state(get_task_states: Callable[..., dict[str, Any]], owner: TableOwner) -> str | None:
    """The state of ``owner``'s task instance (of any try); None if there is none, or it was cleared.

    ``get_task_states`` is the Task SDK's (``RuntimeTaskInstance.get_task_states``, a task's ``ti`` has it too).
    """
    states = get_task_states(
        dag_id=owner.dag_id,
        task_ids=[owner.task_id],
        run_ids=[owner.run_id],
        map_index=owner.map_index if owner.map_index >= 0 else None,
    )
    key = owner.task_id if owner.map_index < 0 else f"{owner.task_id}_{owner.map_index}"
    return states.get(owner.run_id, {}).get(key)
