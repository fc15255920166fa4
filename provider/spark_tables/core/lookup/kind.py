"""The ``lookup_join`` and ``lookup_reload`` job kinds (FLIP-221), as ``core.kinds`` lists them."""

from spark_tables.core.job_kind import JobKind
from spark_tables.core.lookup.job import LookupJoinJob, LookupReloadJob
from spark_tables.core.lookup.monitoring import lookup_join_summary, lookup_reload_summary
from spark_tables.core.lookup.result import LookupJoinResult, LookupReloadResult

LOOKUP_JOIN = JobKind(
    job=LookupJoinJob,
    result=LookupJoinResult,
    runner="spark_tables.jobs.lookup.join:run_lookup_join",
    summary=lookup_join_summary,
    streams=True,
)
LOOKUP_RELOAD = JobKind(
    job=LookupReloadJob,
    result=LookupReloadResult,
    runner="spark_tables.jobs.lookup.reload:run_lookup_reload",
    summary=lookup_reload_summary,
)
