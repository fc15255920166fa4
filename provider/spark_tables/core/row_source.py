"""Where a job's rows come from: a query, or a PySpark producer function (``module:function``).

A producer is a function of a SparkSession that returns a DataFrame, in a module the driver imports (shipped
with ``py_files``). CTAS and cached tables take their rows this way.
"""

from __future__ import annotations

import re

from spark_tables.core.errors import SpecError

_PRODUCER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def checked_row_source(query: str | None, producer: str | None, what: str) -> str | None:
    """Validate a query/producer pair for ``what`` (for messages); return the query without a final ``;``, or None.

    That the query is a query, not a command, the Airflow side checks as it reads it (``nestable_query``)."""
    if (query is None) == (producer is None):
        raise SpecError(f"{what}: give exactly one of query (a SELECT) or producer ('module:function')")
    if producer is not None:
        if not (isinstance(producer, str) and _PRODUCER.fullmatch(producer)):
            raise SpecError(
                f"{what}: producer {producer!r} is invalid: use 'package.module:function', a function of a "
                "SparkSession that returns a DataFrame"
            )
        return None
    if not isinstance(query, str) or not query.strip():
        raise SpecError(f"{what}: query is empty or not text: give a query (SELECT, WITH, FROM, VALUES or TABLE ...)")
    return query.rstrip().removesuffix(";").rstrip()
