"""The XCom keys this provider's tasks write besides ``return_value`` and the cache registry's, which the
monitoring pages read. Airflow clears a task's XComs when a new try starts, so each holds the latest try's."""

from __future__ import annotations

#: A failed try's report: its try number and error, its Spark job, what the job said before it failed (a CTAS
#: table's steps among it) and what the cleanup after it undid.
FAILED_TRY = "spark_tables.failed_try"
#: A reload sensor's latest reckoning: which lookup table, when its next reload is due, loads failing in a row.
RELOAD_DUE = "spark_tables.lookup.reload_due"
