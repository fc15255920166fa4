"""The ``sql`` job kind, as ``core.kinds`` lists it."""

from spark_tables.core.job_kind import JobKind
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.sql.monitoring import sql_summary
from spark_tables.core.sql.result import SqlResult

SQL = JobKind(
    job=SqlJob,
    result=SqlResult,
    runner="spark_tables.jobs.sql.runner:run_sql",
    summary=sql_summary,
    table_formats=lambda job: job.table_formats,
)
