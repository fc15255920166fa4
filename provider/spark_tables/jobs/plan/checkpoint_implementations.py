"""The implementation of every stateful node a sink's query holds state of, kept in its checkpoint, and the check
that a plan executed again runs each node where its state was written.

Spark's stream-stream join and the transform-with-state operators keep different state, so a node moved from one
to the other (by recompiling the plan, or by editing its implementation) cannot resume: Spark would fail inside the
query, or read state it does not understand. The check runs for every sink before any query starts; the record is
written before the query starts, so a checkpoint with Spark's offsets but no record was not written by this
provider's plan, and is refused.
"""

from __future__ import annotations

import json

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.nodes import Node
from spark_tables.jobs import files

#: The record's file in a sink query's checkpoint folder, beside Spark's own.
IMPLEMENTATIONS_FILE = "spark_tables_implementations.json"


def node_implementations(plan: CompiledPlan, sink: Node) -> dict[int, str]:
    """The implementation of each stateful node upstream of ``sink``, by node id."""
    return {node.id: node.runs_on for node in plan.stateful_upstream(sink.id) if node.runs_on is not None}


def recorded_implementations(checkpoint: str) -> dict[int, str] | None:
    """What the checkpoint's query ran its nodes on; None for a query that never ran."""
    folder = checkpoint.rstrip("/")
    if files.exists(f"{folder}/{IMPLEMENTATIONS_FILE}"):
        recorded = json.loads(files.read_text(f"{folder}/{IMPLEMENTATIONS_FILE}"))
        return {int(node_id): implementation for node_id, implementation in recorded.items()}
    if files.exists(f"{folder}/offsets"):
        raise SpecError(
            f"checkpoint {checkpoint} holds a query's offsets but no {IMPLEMENTATIONS_FILE}: it was not written by "
            "EXECUTE PLAN; execute the plan with a new checkpoint folder"
        )
    return None


def check_implementations(plan: CompiledPlan, sink: Node, checkpoint: str) -> None:
    """``SpecError`` when a stateful node upstream of ``sink`` would run on another implementation than its
    state's."""
    recorded = recorded_implementations(checkpoint)
    if recorded is None:
        return
    for node_id, implementation in node_implementations(plan, sink).items():
        was = recorded.get(node_id, implementation)  # a node the query did not run has no state yet
        if was != implementation:
            node = plan.node(node_id)
            raise SpecError(
                f"node {node_id} ({node.TYPE}) would run on {implementation}, but checkpoint {checkpoint} holds its "
                f"state as {was} keeps it, which {implementation} cannot read: run the plan as compiled before "
                f"(implementation {was}), or execute it with a new checkpoint folder"
            )


def record_implementations(plan: CompiledPlan, sink: Node, checkpoint: str) -> None:
    """Write the implementations of the nodes upstream of ``sink`` into its query's checkpoint (before the query
    starts)."""
    implementations = {
        str(node_id): implementation for node_id, implementation in node_implementations(plan, sink).items()
    }
    files.write_text(f"{checkpoint.rstrip('/')}/{IMPLEMENTATIONS_FILE}", json.dumps(implementations, indent=1) + "\n")
