"""The compiled plan as a JSON document a person reads, diffs and edits, and the checks it passes when read.

```
{"format_version": 1, "configuration": {"table.exec.state.ttl": "0 ms"}, "statements": ["INSERT INTO ..."],
 "sources": ["default.orders"], "sinks": [{"name": "counts", "kind": "postgres-upsert", ...}],
 "nodes": [{"id": 1, "type": "stream-exec-table-source-scan", "version": 1, "inputs": [], ...}, ...]}
```

Nodes come in an order where every node follows its inputs. Reading a plan checks everything that can be checked
without Spark (format version, node types and versions, the graph, the state entries, the sinks); that the
tables and columns still exist is checked by Spark when the plan is explained or executed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.plan.nodes import Node, Sink, SourceScan, node_from_dict
from spark_tables.core.streaming.options import check_option_names
from spark_tables.core.streaming.sinks import PlanSink, sink_from_dict

FORMAT_VERSION = 1


@dataclass(frozen=True)
class CompiledPlan:
    nodes: tuple[Node, ...]
    sources: tuple[str, ...]
    sinks: tuple[PlanSink, ...]
    configuration: dict[str, str] = field(default_factory=dict)
    statements: tuple[str, ...] = ()
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        _check_graph(self)

    def node(self, node_id: int) -> Node:
        return self._by_id[node_id]

    @property
    def _by_id(self) -> dict[int, Node]:
        return {node.id: node for node in self.nodes}

    def stateful_upstream(self, node_id: int) -> tuple[Node, ...]:
        """The stateful nodes node ``node_id`` reads from, directly or through others, in id order: those whose
        state a sink's query holds."""
        found: dict[int, Node] = {}
        pending = list(self.node(node_id).inputs)
        while pending:
            node = self.node(pending.pop())
            if node.stateful:
                found[node.id] = node
            pending.extend(node.inputs)
        return tuple(found[found_id] for found_id in sorted(found))

    def sink(self, name: str) -> PlanSink:
        return next(sink for sink in self.sinks if sink.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": self.format_version,
            "configuration": dict(self.configuration),
            "statements": list(self.statements),
            "sources": list(self.sources),
            "sinks": [sink.to_dict() for sink in self.sinks],
            "nodes": [node.to_dict() for node in self.nodes],
        }

    def to_json(self) -> str:
        """Indented, one key order: a plan compiled twice from the same SQL is the same text."""
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "plan") -> CompiledPlan:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise SpecError(f"{where} is not valid JSON ({err}): fix the file, or compile the plan again") from None
        return cls.from_dict(data, where)

    @classmethod
    def from_dict(cls, data: Any, where: str = "plan") -> CompiledPlan:
        if not isinstance(data, dict):
            raise SpecError(f"{where} must be a JSON object, not {type(data).__name__}")
        version = data.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise SpecError(f"{where} has no format_version: it is not a compiled plan of this provider")
        if version > FORMAT_VERSION:
            raise SpecError(
                f"{where} has format version {version}, newer than this provider reads ({FORMAT_VERSION}): "
                "upgrade airflow-provider-spark-tables"
            )
        if version < 1:
            raise SpecError(f"{where} has format version {version}: versions start at 1")
        unknown = sorted(set(data) - {"format_version", "configuration", "statements", "sources", "sinks", "nodes"})
        if unknown:
            raise SpecError(f"{where}: unknown field(s) {unknown}")
        nodes, sources, sinks = data.get("nodes"), data.get("sources", []), data.get("sinks", [])
        if not isinstance(nodes, list) or not nodes:
            raise SpecError(f"{where}: nodes must be a non-empty list")
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise SpecError(f"{where}: sources must be a list of table names")
        if not isinstance(sinks, list):
            raise SpecError(f"{where}: sinks must be a list")
        configuration = data.get("configuration", {})
        if not isinstance(configuration, dict):
            raise SpecError(f"{where}: configuration must be an object of option names and values")
        check_option_names(configuration, PlanOptions.KNOWN_OPTIONS, f"{where}: configuration")
        statements = data.get("statements", [])
        if not isinstance(statements, list) or not all(isinstance(s, str) for s in statements):
            raise SpecError(f"{where}: statements must be a list of SQL text")
        try:
            return cls(
                nodes=tuple(node_from_dict(node, position) for position, node in enumerate(nodes)),
                sources=tuple(sources),
                sinks=tuple(sink_from_dict(sink, f"{where}: sink {i}") for i, sink in enumerate(sinks)),
                configuration={str(key): str(value) for key, value in configuration.items()},
                statements=tuple(statements),
                format_version=version,
            )
        except SpecError as err:
            message = str(err)
            raise SpecError(message if message.startswith(where) else f"{where}: {message}") from None


def _check_graph(plan: CompiledPlan) -> None:
    """Ids unique, every input an earlier node, every node read by another or a sink, scans and sinks declared."""
    seen: set[int] = set()
    read: set[int] = set()
    sink_names = [sink.name for sink in plan.sinks]
    if len(set(sink_names)) != len(sink_names):
        raise SpecError(f"sinks {sink_names} name one sink twice: declare each sink once")
    for node in plan.nodes:
        if node.id in seen:
            raise SpecError(f"node id {node.id} is used twice: give every node an id of its own")
        for input_id in node.inputs:
            if input_id not in seen:
                raise SpecError(
                    f"node {node.id} reads node {input_id}, which does not come before it: "
                    "list each node after its inputs"
                )
        seen.add(node.id)
        read.update(node.inputs)
        if isinstance(node, SourceScan) and node.table not in plan.sources:
            raise SpecError(f"node {node.id} reads table {node.table}, which sources does not list: add it")
        if isinstance(node, Sink) and node.sink not in sink_names:
            raise SpecError(f"node {node.id} writes sink {node.sink}, which sinks does not declare: add it")
    unread = [node.id for node in plan.nodes if node.id not in read and not isinstance(node, Sink)]
    if unread:
        raise SpecError(f"the output of node(s) {unread} goes nowhere: remove them, or feed them to a sink")
    if not any(isinstance(node, Sink) for node in plan.nodes):
        raise SpecError("the plan writes no sink: compile an INSERT INTO statement")
