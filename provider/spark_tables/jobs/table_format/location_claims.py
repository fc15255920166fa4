"""The claim a CTAS writes in an explicit LOCATION of a file table before it creates its table there
(``LOCATION_CLAIM``, created exclusively: the first writer wins), naming the table and the task: how two CTAS into one
folder cannot both pass the emptiness check, and how cleanup proves that a folder's files are the task's."""

from __future__ import annotations

import json
import logging
from typing import Any

from spark_tables.core.ctas.ownership import LOCATION_CLAIM, TableOwner
from spark_tables.core.errors import JobError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.jobs import files

log = logging.getLogger(__name__)


def claim_location(location: str, table: TableIdentifier, owner: TableOwner) -> None:
    """Claim an explicit LOCATION for the task's table before creating it: it must hold no file, and no other task
    may claim it meanwhile (the claim file is created exclusively). A claim this task left in an earlier try is
    taken over. Raises ``JobError`` in one line otherwise."""
    claim = _claim_file(location)
    names = files.list_names(location) if files.exists(location) else []
    if names == [LOCATION_CLAIM] and location_claimant(location) == owner.task():
        log.info("location %s was claimed by an earlier try of this task: taking it over", location)
        return
    if names:
        claimant = location_claimant(location) if LOCATION_CLAIM in names else None
        if claimant is not None:
            raise JobError(
                f"location {location} is claimed by task {_task_words(claimant)}: CTAS writes only to a location "
                f"no other task holds; choose another (if that task has ended, remove its claim {claim} to free the "
                "location)"
            )
        raise JobError(
            f"location {location} is not empty: CTAS writes only to an empty location, so that a failure can "
            "remove what it wrote; choose another, or empty it"
        )
    text = json.dumps({"table": str(table), "task": owner.task()})
    if not files.create_exclusive(claim, text.encode()):
        claimant = location_claimant(location)
        raise JobError(
            f"location {location} was claimed meanwhile by task {_task_words(claimant or {})}: choose another"
        )
    log.info("claimed location %s for %s", location, table)


def release_location(location: str, owner: TableOwner) -> None:
    """Remove the task's claim of a LOCATION where no table of the task holds it; another task's claim is left."""
    if location_claimant(location) == owner.task():
        files.remove(_claim_file(location))
        log.info("released the claim of location %s", location)


def location_claimant(location: str) -> dict[str, Any] | None:
    """The task a LOCATION's claim names (dag, run, task, map index); None without a readable claim."""
    try:
        data = json.loads(files.read_text(_claim_file(location)))
    except (FileNotFoundError, ValueError):
        return None
    task = data.get("task") if isinstance(data, dict) else None
    return task if isinstance(task, dict) else None


def _claim_file(location: str) -> str:
    return f"{location.rstrip('/')}/{LOCATION_CLAIM}"


def _task_words(task: dict[str, Any]) -> str:
    return f"{task.get('dag_id')}.{task.get('task_id')} of run {task.get('run_id')}"
