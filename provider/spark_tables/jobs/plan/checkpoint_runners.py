"""The runner of every stateful node a sink's query holds state of, kept in its checkpoint, and the check that a plan
executed again runs each node where its state was written.

Spark's stream-stream join and the transform-with-state operators keep different state, so a node moved from one
to the other (by recompiling the plan, or by editing its runner) cannot resume: Spark would fail inside the query, or
read state it does not understand. The check runs for every sink before any query starts. A checkpoint with
Spark's metadata but without the record was written before runners existed: every node ran on
transform-with-state.
"""

from __future__ import annotations

import json

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.nodes import Node
from spark_tables.core.plan.runners import TRANSFORM_WITH_STATE
from spark_tables.jobs import files

#: The record's file in a sink query's checkpoint folder, beside Spark's own.
RUNNERS_FILE = "spark_tables_runners.json"


def node_runners(plan: CompiledPlan, sink: Node) -> dict[int, str]:
    """The runner of each stateful node upstream of ``sink``, by node id."""
    return {node.id: node.runs_on for node in plan.stateful_upstream(sink.id) if node.runs_on is not None}


def recorded_runners(checkpoint: str) -> dict[int, str] | None:
    """What the checkpoint's query ran its nodes on (nodes it does not name: transform-with-state); None for a query
    that never ran."""
    folder = checkpoint.rstrip("/")
    if files.exists(f"{folder}/{RUNNERS_FILE}"):
        return {
            int(node_id): runner for node_id, runner in json.loads(files.read_text(f"{folder}/{RUNNERS_FILE}")).items()
        }
    return {} if files.exists(f"{folder}/offsets") else None


def check_runners(plan: CompiledPlan, sink: Node, checkpoint: str) -> None:
    """``SpecError`` when a stateful node upstream of ``sink`` would run on another runner than its state's."""
    recorded = recorded_runners(checkpoint)
    if recorded is None:
        return
    for node_id, runner in node_runners(plan, sink).items():
        was = recorded.get(node_id, TRANSFORM_WITH_STATE)
        if was != runner:
            node = plan.node(node_id)
            raise SpecError(
                f"node {node_id} ({node.TYPE}) would run on {runner}, but checkpoint {checkpoint} holds its state "
                f"as {was} keeps it, which {runner} cannot read: run the plan as compiled before (runner {was}), or "
                "execute it with a new checkpoint folder"
            )


def record_runners(plan: CompiledPlan, sink: Node, checkpoint: str) -> None:
    """Write the runners of the nodes upstream of ``sink`` into its query's checkpoint (before the query starts)."""
    runners = {str(node_id): runner for node_id, runner in node_runners(plan, sink).items()}
    files.write_text(f"{checkpoint.rstrip('/')}/{RUNNERS_FILE}", json.dumps(runners, indent=1) + "\n")
