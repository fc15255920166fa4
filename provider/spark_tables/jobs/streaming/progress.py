"""What a streaming query's progress says, read the same way from a driver's query and a Spark Connect client's."""

from __future__ import annotations

from typing import Any


def input_rows(progress: Any, leave_out: str | None = None) -> int:
    """The rows one micro-batch read from the query's sources (those whose description holds ``leave_out`` left out).

    Added up from its sources: a Spark Connect client's progress has no ``numInputRows`` of its own (the server's
    JSON of it leaves the total out), its sources do."""
    return sum(
        source.get("numInputRows") or 0
        for source in progress.get("sources") or []
        if leave_out is None or leave_out not in (source.get("description") or "")
    )


def observed_metrics(progress: Any, name: str) -> dict[str, Any] | None:
    """The metrics one micro-batch observed under ``name`` (``DataFrame.observe``), by column; None without them.

    A driver's progress holds them as a row of those columns; a Spark Connect client's as Spark's JSON of the row, its
    ``values`` and its ``schema``, which pyspark turns into a row of those two."""
    row = (progress.get("observedMetrics") or {}).get(name)
    if row is None:
        return None
    metrics = row.asDict()
    if set(metrics) == {"values", "schema"} and isinstance(metrics["schema"], dict):
        return dict(zip([field["name"] for field in metrics["schema"]["fields"]], metrics["values"], strict=True))
    return metrics
