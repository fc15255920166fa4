"""The ``streaming_aggregation`` job kind (FLIP-365's buffered output of Spark's own aggregation), as
``core.kinds`` lists it."""

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.aggregation.result import StreamingAggregationResult
from spark_tables.core.job_kind import JobKind


def refused_in_session_mode(job: StreamingAggregationJob) -> str | None:
    """An aggregation buffered in memory or in a log: ``FlushOptions.refused_in_session_mode`` says why."""
    return job.options.flush.refused_in_session_mode()


STREAMING_AGGREGATION = JobKind(
    job=StreamingAggregationJob,
    result=StreamingAggregationResult,
    runner="spark_tables.jobs.aggregation.runner:run_streaming_aggregation",
    streams=True,
    refused_in_session_mode=refused_in_session_mode,
)
