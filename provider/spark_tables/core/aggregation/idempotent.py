"""FLIP-365's idempotent aggregates, as Spark SQL spells them.

An aggregation's output is idempotent when, of several results for one key, emitting only the last gives the same
outcome (FLIP-365's ``isOutputIdempotent``). The FLIP names which: the DataStream reductions (``reduce``, ``sum``,
``min``, ``max``, ``minBy``, ``maxBy``) and the SQL aggregates ``count``, ``sum``, ``sum0``, ``avg``, ``min``,
``max``, ``first_value``, ``last_value``, ``listagg``, the standard deviations and variances, ``collect`` and
``DISTINCT``. Spark has each of them, under the names below (``sum0`` is Flink's internal SUM that starts at 0:
Spark has none). An aggregation that calls any other aggregate function is not buffered: the job names it and
stops before its query starts.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.flush import MAX_INTERVAL_OPTION

#: Spark SQL's names of FLIP-365's idempotent aggregates (aliases included), lower case.
SPARK_IDEMPOTENT_AGGREGATES = frozenset(
    {
        "count", "sum", "avg", "mean", "min", "max", "min_by", "max_by",
        "first", "first_value", "last", "last_value", "listagg", "string_agg",
        "stddev", "std", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
        "collect_list", "array_agg", "collect_set",
    }
)  # fmt: skip


def refuse_non_idempotent(aggregates: Iterable[str], where: str) -> None:
    """``SpecError`` naming the first of ``aggregates`` (Spark function names) that FLIP-365 does not buffer."""
    for name in aggregates:
        if name.lower() not in SPARK_IDEMPOTENT_AGGREGATES:
            raise SpecError(
                f"{where}: aggregate {name.lower()} is not idempotent (FLIP-365 buffers count, sum, avg, min, max, "
                "min_by, max_by, first_value, last_value, listagg, stddev/variance (pop and samp), collect_list, "
                f"collect_set and DISTINCT): compute it another way, or run without {MAX_INTERVAL_OPTION}"
            )
