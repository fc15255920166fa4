"""What ``EXPLAIN PLAN`` shows: the node graph with each stateful node's implementation and TTL per input, and warnings.

The result is structured data (for XCom, and the Airflow UI's graph of the plan) with a text rendering for logs.
A warning is given where an operator keeps its state for less time than an operator upstream of it: FLIP-292 notes
that unaligned TTLs can give surprising results (a row expired downstream while its upstream state lives on); and
where a left join on Spark's join would send its expired left rows late (``left_join_warnings``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from spark_tables.core.durations import format_duration
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.implementations import SPARK_STREAM_JOIN, TRANSFORM_WITH_STATE
from spark_tables.core.plan.nodes import Join, Node, Sink
from spark_tables.core.plan.state import StateEntry


def explain(plan: CompiledPlan, job_ttl: timedelta) -> dict[str, Any]:
    """The plan's graph as execution would run it with ``job_ttl`` as the job's ``table.exec.state.ttl``."""
    nodes = []
    for node in plan.nodes:
        entry: dict[str, Any] = {
            "id": node.id,
            "type": node.TYPE,
            "version": node.version,
            "inputs": list(node.inputs),
            "description": node.description,
            "output_schema": [column.to_dict() for column in node.output_schema],
        }
        if node.stateful:
            entry["implementation"] = node.runs_on
            entry["state"] = [
                {**state.to_dict(), "ttl_ms": state.ttl_ms, "from": "plan" if node.state is not None else "job"}
                for state in node.effective_state(job_ttl)
            ]
        nodes.append(entry)
    return {
        "format_version": plan.format_version,
        "sources": list(plan.sources),
        "sinks": [sink.to_dict() for sink in plan.sinks],
        "nodes": nodes,
        "edges": [[input_id, node.id] for node in plan.nodes for input_id in node.inputs],
        "warnings": ttl_warnings(plan, job_ttl) + left_join_warnings(plan),
    }


def ttl_warnings(plan: CompiledPlan, job_ttl: timedelta) -> list[str]:
    """One line for each stateful input whose TTL is shorter than that of a stateful operator upstream of it."""
    warnings = []
    for node in plan.nodes:
        if not node.stateful:
            continue
        for state, input_id in zip(node.effective_state(job_ttl), node.inputs, strict=True):
            for upstream, upstream_state in _nearest_stateful(plan, input_id, job_ttl):
                if _longer(upstream_state.ttl, state.ttl):
                    warnings.append(
                        f"node {node.id} ({node.TYPE}) keeps its {state.name} for {_shown(state.ttl)}, less than "
                        f"node {upstream.id} ({upstream.TYPE}) upstream keeps its {upstream_state.name} "
                        f"({_shown(upstream_state.ttl)}): rows still live upstream may be gone here; give downstream "
                        "operators a TTL at least as long"
                    )
    return warnings


def left_join_warnings(plan: CompiledPlan) -> list[str]:
    """One line for each left join on Spark's join in a sink's query that also runs a node on transform-with-state:
    that query runs without no-data micro-batches (transform-with-state would never end available-now), so the join's
    left rows that expired unmatched wait for a micro-batch with rows."""
    warnings: dict[int, str] = {}
    for sink in plan.nodes:
        if not isinstance(sink, Sink):
            continue
        stateful = plan.stateful_upstream(sink.id)
        on_tws = [node.id for node in stateful if node.runs_on == TRANSFORM_WITH_STATE]
        for node in stateful:
            if on_tws and isinstance(node, Join) and node.join_type == "LEFT" and node.runs_on == SPARK_STREAM_JOIN:
                warnings.setdefault(
                    node.id,
                    f"node {node.id} ({node.TYPE}) sends a left row that met no right row once its TTL has passed, "
                    f"but its query also runs node {on_tws[0]} on {TRANSFORM_WITH_STATE}, and so without no-data "
                    "micro-batches: such a row comes with a later micro-batch that has rows, not in the run after its "
                    f"TTL; set the join's implementation to {TRANSFORM_WITH_STATE} to send it at once",
                )
    return list(warnings.values())


def explain_text(explained: dict[str, Any], uri: str) -> str:
    """The explained plan as lines for a task log: one line per node, with its inputs and TTLs."""
    lines = [f"== Compiled plan {uri} (format {explained['format_version']}) =="]
    for node in explained["nodes"]:
        inputs = f" <- {', '.join(str(i) for i in node['inputs'])}" if node["inputs"] else ""
        lines.append(f"[{node['id']}] {node['type']}_{node['version']}{inputs}: {node['description']}")
        if "implementation" in node:
            lines.append(f"      implementation {node['implementation']}")
        for state in node.get("state", []):
            lines.append(f"      state {state['index']} {state['name']}: ttl {state['ttl']} ({state['from']})")
    lines.extend(f"warning: {warning}" for warning in explained["warnings"])
    return "\n".join(lines)


def _nearest_stateful(plan: CompiledPlan, node_id: int, job_ttl: timedelta) -> list[tuple[Node, StateEntry]]:
    """The stateful operators found first on each path upstream from ``node_id`` (that node included)."""
    node = plan.node(node_id)
    if node.stateful:
        return list(zip([node] * len(node.inputs), node.effective_state(job_ttl), strict=True))
    return [found for input_id in node.inputs for found in _nearest_stateful(plan, input_id, job_ttl)]


def _longer(ttl: timedelta, than: timedelta) -> bool:
    """Whether state kept ``ttl`` outlives state kept ``than`` (zero: for ever)."""
    if than == timedelta(0):
        return False
    return ttl == timedelta(0) or ttl > than


def _shown(ttl: timedelta) -> str:
    return "ever (0 ms)" if ttl == timedelta(0) else format_duration(ttl)
