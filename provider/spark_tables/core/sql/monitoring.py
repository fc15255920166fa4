"""What the monitoring pages show of a ``sql`` job: its CTAS statements' tables, step by step, from its output as its
XCom holds it (``core.sql.result``)."""

from __future__ import annotations

from typing import Any

from spark_tables.core.ctas.monitoring import CTAS_FIELDS, table_row, undone_before


def sql_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    """A ``sql`` job's CTAS statements' tables, then the leftovers of earlier tries it dropped before them."""
    rows = [table_row(table, failure) for table in value.get("ctas") or []]
    rows += [
        {**CTAS_FIELDS, "undone_before": step, "steps": [f"an earlier try's leftovers dropped: {step}"]}
        for step in value.get("undone_before") or []
    ]
    return {"ctas": rows, "undone_before": undone_before(value), "undone": value.get("undone") or []}
