"""The context an operator's ``execute`` gets in these tests, as far as the operators read it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def task_context() -> dict[str, Any]:
    """A context whose task instance is try 1 of task ``t`` in run ``r`` of DAG ``d``, not mapped; what the task
    pushes to XCom (``xcom_push``) lands in ``ti.pushed``, by key."""
    pushed: dict[str, Any] = {}
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1, pushed=pushed, stats_tags={})
    ti.xcom_push = lambda key, value: pushed.__setitem__(key, value)
    return {"ti": ti}
