"""What a ``streaming_aggregation`` job reports: its query's micro-batches, state, sink writes and buffer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from spark_tables.core.job_output import JobOutput


@dataclass(frozen=True)
class StreamingAggregationResult(JobOutput):
    """The query's report, as a plan's sink queries report theirs (``jobs.streaming.sink_queries.SinkQuery.report``)."""

    kind: ClassVar[str] = "streaming_aggregation"
    query: dict[str, Any]
