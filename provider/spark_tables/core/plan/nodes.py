"""The nodes of a compiled plan: each with a stable id, a type with its own version, its inputs, its output schema
and a description; stateful ones with their ``state`` entries.

The types follow Flink's exec nodes (``stream-exec-join`` and so on). A node type's version changes when the meaning
of its fields changes, so that a plan written for an older version is either still read the same way or refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.aggregates import AggregateCall
from spark_tables.core.plan.implementations import (
    DEDUPLICATE_IMPLEMENTATIONS,
    JOIN_IMPLEMENTATIONS,
    TRANSFORM_WITH_STATE,
)
from spark_tables.core.plan.state import StateEntry, default_entries, parse_entries
from spark_tables.core.streaming.sources import KafkaTopicSource

KEEP = ("first", "last")
JOIN_TYPES = ("INNER", "LEFT")


@dataclass(frozen=True)
class Column:
    """A column of a node's output: its name, its Spark SQL type (``bigint``, ``decimal(20,2)``) and nullability."""

    name: str
    type: str
    nullable: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "nullable": self.nullable}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Column:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(data.get("type"), str):
            raise SpecError(f"{where}: each output_schema column must be an object with a name and a type")
        return cls(name=data["name"], type=data["type"], nullable=bool(data.get("nullable", True)))


@dataclass(frozen=True)
class Node:
    """What every node has. Subclasses add their own fields; ``state`` is None where the plan gives none."""

    TYPE: ClassVar[str] = ""
    VERSIONS: ClassVar[tuple[int, ...]] = (1,)
    #: The name of each input's state, for stateful nodes; empty for stateless ones.
    STATE_NAMES: ClassVar[tuple[str, ...]] = ()
    INPUTS: ClassVar[int] = 1

    id: int
    inputs: tuple[int, ...]
    output_schema: tuple[Column, ...] = ()
    description: str = ""
    version: int = 1
    state: tuple[StateEntry, ...] | None = None

    @property
    def stateful(self) -> bool:
        return bool(self.STATE_NAMES)

    @property
    def runs_on(self) -> str | None:
        """A stateful node's implementation (``core.plan.implementations``); None for a stateless one."""
        return TRANSFORM_WITH_STATE if self.stateful else None

    def effective_state(self, job_ttl: timedelta) -> tuple[StateEntry, ...]:
        """The TTL of each input's state as execution applies it: the plan's entries, else the job's TTL."""
        return self.state if self.state is not None else default_entries(self.STATE_NAMES, job_ttl)

    def fields(self) -> dict[str, Any]:
        """The type's own fields, as the plan writes them."""
        return {}

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "id": self.id,
            "type": self.TYPE,
            "version": self.version,
            "inputs": list(self.inputs),
            **self.fields(),
            "output_schema": [column.to_dict() for column in self.output_schema],
            "description": self.description,
        }
        if self.state is not None:
            document["state"] = [entry.to_dict() for entry in self.state]
        return document


@dataclass(frozen=True)
class SourceScan(Node):
    """Reads a table as a stream: a file-source table's folder, a rate source, any streaming table; or the source the
    task declared under that name (``source``: a Kafka topic), which the plan keeps, connection id and all."""

    TYPE: ClassVar[str] = "stream-exec-table-source-scan"
    INPUTS: ClassVar[int] = 0
    table: str = ""
    source: KafkaTopicSource | None = None

    def fields(self) -> dict[str, Any]:
        return {"table": self.table, **({"source": self.source.to_dict()} if self.source else {})}


@dataclass(frozen=True)
class Calc(Node):
    """Projects and filters rows: Spark SQL expressions over the input's columns (stateless)."""

    TYPE: ClassVar[str] = "stream-exec-calc"
    projection: tuple[str, ...] = ()
    condition: str | None = None

    def fields(self) -> dict[str, Any]:
        return {"projection": list(self.projection), "condition": self.condition}


@dataclass(frozen=True)
class Deduplicate(Node):
    """Keeps the first (or the latest) row of each key in processing-time order, on its ``implementation``."""

    TYPE: ClassVar[str] = "stream-exec-deduplicate"
    STATE_NAMES: ClassVar[tuple[str, ...]] = ("deduplicateState",)
    key: tuple[str, ...] = ()
    keep: str = "first"
    implementation: str = TRANSFORM_WITH_STATE

    @property
    def runs_on(self) -> str:
        return self.implementation

    def fields(self) -> dict[str, Any]:
        return {"key": list(self.key), "keep": self.keep, "implementation": self.implementation}


@dataclass(frozen=True)
class GroupAggregate(Node):
    """Aggregates by key over a changelog: each key's result updated (retracted and emitted again) as rows come."""

    TYPE: ClassVar[str] = "stream-exec-group-aggregate"
    STATE_NAMES: ClassVar[tuple[str, ...]] = ("groupAggregateState",)
    key: tuple[str, ...] = ()
    aggregates: tuple[AggregateCall, ...] = ()

    def fields(self) -> dict[str, Any]:
        return {"key": list(self.key), "aggregates": [call.to_dict() for call in self.aggregates]}


@dataclass(frozen=True)
class Join(Node):
    """A regular equi-join of two streams, on its ``implementation``: each side's rows kept in state of their own,
    with a TTL of their own."""

    TYPE: ClassVar[str] = "stream-exec-join"
    STATE_NAMES: ClassVar[tuple[str, ...]] = ("leftState", "rightState")
    INPUTS: ClassVar[int] = 2
    join_type: str = "INNER"
    left_key: tuple[str, ...] = ()
    right_key: tuple[str, ...] = ()
    implementation: str = TRANSFORM_WITH_STATE

    @property
    def runs_on(self) -> str:
        return self.implementation

    def fields(self) -> dict[str, Any]:
        return {
            "join_type": self.join_type,
            "left_key": list(self.left_key),
            "right_key": list(self.right_key),
            "implementation": self.implementation,
        }


@dataclass(frozen=True)
class Sink(Node):
    """Writes its input's changelog into one of the plan's sinks."""

    TYPE: ClassVar[str] = "stream-exec-sink"
    sink: str = ""

    def fields(self) -> dict[str, Any]:
        return {"sink": self.sink}


#: Every node type a plan may use, by its ``type``.
NODE_TYPES: dict[str, type[Node]] = {
    node.TYPE: node for node in (SourceScan, Calc, Deduplicate, GroupAggregate, Join, Sink)
}
_COMMON = {"id", "type", "version", "inputs", "output_schema", "description", "state"}


def node_from_dict(data: Any, position: int) -> Node:
    """One node as a plan writes it, checked: its type and version known, its own fields well formed."""
    where = f"plan node {data.get('id', position) if isinstance(data, dict) else position}"
    if not isinstance(data, dict):
        raise SpecError(f"plan node {position}: must be a JSON object")
    node_class = NODE_TYPES.get(data.get("type"))
    if node_class is None:
        raise SpecError(
            f"{where}: type {data.get('type')!r} does not exist: use one of {', '.join(sorted(NODE_TYPES))}"
        )
    where = f"{where} ({node_class.TYPE})"
    version = data.get("version", 1)
    if version not in node_class.VERSIONS:
        raise SpecError(
            f"{where}: version {version!r} is not known: this provider reads version(s) "
            f"{', '.join(map(str, node_class.VERSIONS))}; recompile the plan or upgrade the provider"
        )
    own = {f.name for f in dataclasses.fields(node_class)} - _COMMON
    unknown = sorted(set(data) - _COMMON - own)
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {unknown}: {node_class.TYPE} has {sorted(own) or 'none'}")
    node_id = data.get("id")
    if isinstance(node_id, bool) or not isinstance(node_id, int) or node_id < 1:
        raise SpecError(f"{where}: id {node_id!r} is invalid: use a whole number from 1")
    inputs = data.get("inputs", [])
    if not isinstance(inputs, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in inputs):
        raise SpecError(f"{where}: inputs must be a list of node ids")
    if len(inputs) != node_class.INPUTS:
        raise SpecError(f"{where}: has {len(inputs)} input(s): {node_class.TYPE} takes {node_class.INPUTS}")
    state = data.get("state")
    if state is not None and not node_class.STATE_NAMES:
        raise SpecError(f"{where}: has state entries, but {node_class.TYPE} keeps no state: remove them")
    common = {
        "id": node_id,
        "inputs": tuple(inputs),
        "version": version,
        "output_schema": tuple(
            Column.from_dict(column, where) for column in _list(data.get("output_schema", []), where, "output_schema")
        ),
        "description": str(data.get("description", "")),
        "state": None if state is None else parse_entries(state, node_class.STATE_NAMES, where),
    }
    return node_class(**common, **_own_fields(node_class, data, where))


def _own_fields(node_class: type[Node], data: dict[str, Any], where: str) -> dict[str, Any]:
    if node_class is SourceScan:
        source = data.get("source")
        return {
            "table": _text(data.get("table"), where, "table"),
            "source": None if source is None else KafkaTopicSource.from_dict(source, where),
        }
    if node_class is Calc:
        condition = data.get("condition")
        if condition is not None:
            _text(condition, where, "condition")
        projection = tuple(
            _text(item, where, "projection") for item in _list(data.get("projection"), where, "projection")
        )
        if not projection:
            raise SpecError(f"{where}: projection is empty: list the expressions it selects")
        return {"projection": projection, "condition": condition}
    if node_class is Deduplicate:
        if data.get("keep") not in KEEP:
            raise SpecError(f"{where}: keep {data.get('keep')!r} is invalid: use 'first' or 'last'")
        return {
            "key": _names(data.get("key"), where, "key"),
            "keep": data["keep"],
            "implementation": _implementation(data, where, DEDUPLICATE_IMPLEMENTATIONS),
        }
    if node_class is GroupAggregate:
        calls = tuple(
            AggregateCall.from_dict(call, where) for call in _list(data.get("aggregates"), where, "aggregates")
        )
        return {"key": _names(data.get("key"), where, "key", allow_empty=True), "aggregates": calls}
    if node_class is Join:
        join_type = data.get("join_type")
        if join_type not in JOIN_TYPES:
            raise SpecError(f"{where}: join_type {join_type!r} is invalid: use one of {', '.join(JOIN_TYPES)}")
        left, right = _names(data.get("left_key"), where, "left_key"), _names(data.get("right_key"), where, "right_key")
        if len(left) != len(right):
            raise SpecError(f"{where}: left_key has {len(left)} column(s), right_key {len(right)}: pair them up")
        return {
            "join_type": join_type,
            "left_key": left,
            "right_key": right,
            "implementation": _implementation(data, where, JOIN_IMPLEMENTATIONS),
        }
    return {"sink": _text(data.get("sink"), where, "sink")}


def _implementation(data: dict[str, Any], where: str, implementations: tuple[str, ...]) -> str:
    """A join's or a deduplication's implementation, one of ``implementations``."""
    implementation = data.get("implementation")
    if implementation not in implementations:
        raise SpecError(
            f"{where}: implementation {implementation!r} is invalid: use one of {', '.join(implementations)}"
        )
    return implementation


def _list(value: Any, where: str, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(f"{where}: {what} must be a list")
    return value


def _text(value: Any, where: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}: {what} must be non-empty text")
    return value


def _names(value: Any, where: str, what: str, allow_empty: bool = False) -> tuple[str, ...]:
    names = tuple(_text(name, where, what) for name in _list(value, where, what))
    if not names and not allow_empty:
        raise SpecError(f"{where}: {what} is empty: name at least one column")
    return names
