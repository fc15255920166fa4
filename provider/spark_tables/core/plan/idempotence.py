"""Which outputs may be buffered: FLIP-365's ``isOutputIdempotent``.

An operator's output is idempotent when, of several records for one key, emitting only the last gives the same
result. FLIP-365 names the group aggregation (in SQL: ``count``, ``sum``, ``sum0``, ``avg``, ``min``, ``max``,
``first_value``, ``last_value``, ``listagg``, the standard deviations and variances, ``collect_list``,
``collect_set``, and ``DISTINCT``); in a plan, a sink's rows may be buffered when they come from such an aggregation
through projections and filters only. Everything else (a join, a deduplication, rows straight from a source) sends
records that each matter, and buffering them is refused before the job starts. Every aggregate function a plan
computes (``core.plan.aggregates.FUNCTIONS``) is on FLIP-365's list (``core.aggregation.idempotent``).
"""

from __future__ import annotations

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.nodes import Calc, GroupAggregate, Sink
from spark_tables.core.streaming.flush import MAX_INTERVAL_OPTION


def buffered_aggregation(plan: CompiledPlan, sink: Sink) -> GroupAggregate:
    """The aggregation whose results reach ``sink``; ``SpecError`` (one line) when its rows may not be buffered."""
    node = plan.node(sink.inputs[0])
    while isinstance(node, Calc):
        node = plan.node(node.inputs[0])
    if not isinstance(node, GroupAggregate):
        raise SpecError(
            f"{MAX_INTERVAL_OPTION} buffers idempotent results only (an aggregation's, FLIP-365), but sink "
            f"{sink.sink} takes the rows of node {node.id} ({node.TYPE}), each of which counts: run this plan "
            f"without {MAX_INTERVAL_OPTION}"
        )
    return node
