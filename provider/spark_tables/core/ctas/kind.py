"""The ``ctas`` and ``ctas_cleanup`` job kinds, as ``core.kinds`` lists them."""

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.monitoring import ctas_summary
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult
from spark_tables.core.job_kind import JobKind

CTAS = JobKind(
    job=CtasJob,
    result=CtasResult,
    runner="spark_tables.jobs.ctas.lifecycle:run_ctas",
    summary=ctas_summary,
    table_formats=lambda job: job.table_formats,
)
#: Run after a failed or lost try, by the operators whose jobs make CTAS tables (``operators.ctas_lifecycle``).
CTAS_CLEANUP = JobKind(
    job=CtasCleanupJob, result=CtasCleanupResult, runner="spark_tables.jobs.ctas.lifecycle:run_ctas_cleanup"
)
