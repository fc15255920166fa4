"""Failed tries as the overview lists them: those Airflow records, with what their own reports say, and a try's
error in one line from its log's structured messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FailedTry:
    """A failed try of one of this provider's tasks, as Airflow's task instances and their history record it;
    ``at`` is when it ended (ISO 8601)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    at: str | None


def failed_tries(tries: Iterable[FailedTry], reported: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every failed try, newest first: those Airflow recorded (``tries``), with the error and cleanup their own
    report gives (``reported``: the overview's ``failed_tries``, from ``FAILED_TRY`` XComs; a task's XComs hold
    only its latest try's), and the reported ones Airflow did not list. ``error`` is None where no report says it:
    the route reads it from the try's log (``error_line``)."""
    reports = {_try_key(report): report for report in reported}
    rows = []
    for failed in tries:
        key = (failed.dag_id, failed.run_id, failed.task_id, failed.map_index, failed.try_number)
        report = reports.pop(key, None)
        rows.append(
            {
                "dag_id": failed.dag_id,
                "run_id": failed.run_id,
                "task_id": failed.task_id,
                "map_index": failed.map_index,
                "try_number": failed.try_number,
                "at": failed.at,
                "error": report.get("error") if report else None,
                "cleanup": report.get("cleanup") if report else None,
            }
        )
    rows += [{**report, "map_index": report.get("map_index", -1)} for report in reports.values()]
    return sorted(rows, key=lambda row: (row["at"] or "", row["try_number"] or 0), reverse=True)


def _try_key(report: dict[str, Any]) -> tuple[str, str, str, int, int | None]:
    return (report["dag_id"], report["run_id"], report["task_id"], report.get("map_index", -1), report["try_number"])


def error_line(messages: Iterable[dict[str, Any]]) -> str | None:
    """A failed try's error in one line, from its log's structured messages: the exception of the last message
    that carries one (Airflow logs a task's exception under ``error_detail``, the raised one first), its message's
    first line after its type unless the type is one of Airflow's own; None if the log has none."""
    line = None
    for message in messages:
        detail = message.get("error_detail")
        if not isinstance(detail, list) or not detail or not isinstance(detail[0], dict):
            continue
        kind, text = str(detail[0].get("exc_type") or ""), str(detail[0].get("exc_value") or "")
        first = next((part.strip() for part in text.splitlines() if part.strip()), "")
        line = first if kind.startswith("Airflow") and first else f"{kind}: {first}" if first else kind or None
    return line
