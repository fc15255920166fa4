"""Every job kind of the provider, by name: the one list, read by the job spec, the job result, the Spark driver,
session mode and the monitoring pages (``core.job_kind``).

A new kind is its capability's own folders (``core/<capability>/`` with its job, result and ``kind.py``,
``jobs/<capability>/`` with its runner, an operator) and one line here: its import, and its name in ``KINDS``.
"""

from spark_tables.core.aggregation.kind import STREAMING_AGGREGATION
from spark_tables.core.ctas.kind import CTAS, CTAS_CLEANUP
from spark_tables.core.job_kind import JobKind, by_name
from spark_tables.core.lookup.kind import LOOKUP_JOIN, LOOKUP_RELOAD
from spark_tables.core.plan.kind import PLAN
from spark_tables.core.sql.kind import SQL

KINDS: dict[str, JobKind] = by_name(SQL, CTAS, CTAS_CLEANUP, LOOKUP_JOIN, LOOKUP_RELOAD, PLAN, STREAMING_AGGREGATION)


def kind_of(name: object) -> JobKind | None:
    """The kind named ``name``; None for a name no kind has (a spec or result of another release, a value that is
    no job's)."""
    return KINDS.get(name) if isinstance(name, str) else None
