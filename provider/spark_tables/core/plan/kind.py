"""The ``plan`` job kind (FLIP-292), as ``core.kinds`` lists it."""

from spark_tables.core.job_kind import JobKind
from spark_tables.core.plan.job import PlanJob
from spark_tables.core.plan.result import PlanResult


def refused_in_session_mode(job: PlanJob) -> str | None:
    """An executed plan buffered in memory or in a log: ``FlushOptions.refused_in_session_mode`` says why."""
    return job.options.flush.refused_in_session_mode() if job.statement.executes else None


PLAN = JobKind(
    job=PlanJob,
    result=PlanResult,
    runner="spark_tables.jobs.plan.runner:run_plan",
    streams=True,
    refused_in_session_mode=refused_in_session_mode,
)
