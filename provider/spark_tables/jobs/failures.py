"""Where a job's failure came from, in its one line: the cached table, lookup table or sink query that failed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from spark_tables.core.errors import JobError, one_line
from spark_tables.jobs.cancellation import JobCancelled


@contextlib.contextmanager
def failures_named(source: str) -> Iterator[None]:
    """An error raised inside becomes a ``JobError`` whose line begins with ``source`` (``cache b``, ``lookup table
    customers (crm.customers)``): a task's error then says which of its parts failed. A cancellation passes as it
    is: its line says who stopped the job."""
    try:
        yield
    except JobCancelled:
        raise
    except Exception as err:
        raise JobError(f"{source}: {one_line(err)}") from err
