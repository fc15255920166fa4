"""What the monitoring pages show of a ``ctas`` job's table (and, through ``core.sql.monitoring``, of a ``sql``
job's CTAS tables): each table's steps in one try, as people read them, from the job's output as its XCom holds it
(``core.ctas.result``; read leniently, so that results of earlier releases render too) and, for a failed try, its
report (``failure``: try number, error, what a cleanup job undid)."""

from __future__ import annotations

from typing import Any

#: What the run tab shows of each CTAS table, with its default; an earlier try's leftovers that a job undid come
#: as rows with ``undone_before`` only.
CTAS_FIELDS: dict[str, Any] = {
    "table": None,
    "created": None,
    "replaced": False,
    "reused_from_try": None,
    "skipped": None,
    "dropped_later": False,
    "rows": None,
    "bytes": None,
    "location": None,
    "undone": None,
    "undone_before": None,
}


def ctas_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    """A ``ctas`` task's one table, what its job undid first (for the overview), and what a failed job undid."""
    return {
        "ctas": [table_row(value, failure)],
        "undone_before": undone_before(value),
        "undone": value.get("undone") or [],
    }


def undone_before(value: dict[str, Any]) -> list[Any]:
    """What a job undid before its own work: earlier tries' leftovers of its task, then lost tries' claims it swept."""
    return [*(value.get("undone_before") or []), *(value.get("swept") or [])]


def table_row(report: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    """One CTAS table's row: the fields the run tab shows (``CTAS_FIELDS``) and its ``steps``."""
    table = {field: report.get(field, default) for field, default in CTAS_FIELDS.items()}
    return {**table, "steps": ctas_steps(table, failure)}


def ctas_steps(table: dict[str, Any], failure: dict[str, Any] | None = None) -> list[str]:
    """A CTAS table's lifecycle in one try, step by step, as people read it."""
    steps = [f"an earlier try's leftovers dropped: {step}" for step in table.get("undone_before") or []]
    if table["reused_from_try"]:
        steps.append(f"reused: try {table['reused_from_try']} had completed it")
    elif table["skipped"]:
        steps.append(f"not run: {table['skipped']}")
    elif table["created"]:
        steps.append("created, replacing the table before" if table["replaced"] else "created")
        complete = ", ".join(f"{table[k]:,} {k}" for k in ("rows", "bytes") if table[k] is not None)
        steps.append(f"complete{': ' + complete if complete else ''}")
        if table["dropped_later"]:
            steps.append("dropped later by the same job")
    if failure is None:
        return steps
    steps.append(f"try {failure['try_number']} failed: {failure['error']}")
    if table["undone"] is not None:
        steps += [f"undone by the job: {step}" for step in table["undone"]] or ["undone by the job: nothing was left"]
    elif failure["cleanup"] is not None:
        steps += [f"undone by the cleanup job: {step}" for step in failure["cleanup"]] or [
            "cleanup job: nothing was left"
        ]
    else:
        steps.append("not cleaned up yet: the next try, the failure callback or the next CTAS on this catalog will")
    return steps
