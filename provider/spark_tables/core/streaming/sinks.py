"""Where a compiled plan or a streaming aggregation writes: catalog tables, appended to or kept equal to an
updating result by key, PostgreSQL tables upserted by key, or compacted Kafka topics written by key.

A DAG author names a PostgreSQL sink in the operator (``PostgresUpsertSink``) and writes ``INSERT INTO <name>``; any
other name is a catalog table. The plan keeps the sink's connection id, never its settings: the Airflow side
resolves the connection when the plan is executed. A streaming aggregation writes into a ``PostgresUpsertSink`` or
a ``TableUpsertSink``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier, checked_columns, checked_plain_name
from spark_tables.core.kafka import checked_topic

_PG_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)?")


@dataclass(frozen=True)
class TableSink:
    """A catalog table the plan appends its rows to; it takes insert-only results."""

    name: str
    kind: str = "table"

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", str(TableIdentifier.parse(self.name)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}


@dataclass(frozen=True)
class PostgresUpsertSink:
    """A PostgreSQL table kept equal to an updating result: rows upserted by ``key``, deleted rows deleted.

    :param name: the name ``INSERT INTO`` uses in the plan's SQL (letters, digits, underscores).
    :param conn_id: Airflow connection of the database (type postgres).
    :param table: ``table`` or ``schema.table`` in that database; it must exist, with a unique index on ``key``.
    :param key: the columns that identify a result row (the query's GROUP BY or deduplication key, usually).
    """

    name: str
    conn_id: str
    table: str
    key: Sequence[str]
    kind: str = "postgres-upsert"

    def __post_init__(self) -> None:
        checked_plain_name(self.name, "postgres sink")
        if not isinstance(self.conn_id, str) or not self.conn_id:
            raise SpecError(f"postgres sink {self.name}: conn_id must name an Airflow connection of the database")
        if not isinstance(self.table, str) or not _PG_TABLE.fullmatch(self.table):
            raise SpecError(f"postgres sink {self.name}: table {self.table!r} is invalid: use table or schema.table")
        object.__setattr__(self, "key", checked_columns(self.key, f"postgres sink {self.name}: key", required=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "conn_id": self.conn_id,
            "table": self.table,
            "key": list(self.key),
        }


@dataclass(frozen=True)
class TableUpsertSink:
    """A catalog table kept equal to an updating result by ``key``, a commit per write as its format makes one: a
    Delta table takes a MERGE (deleted rows deleted); a file table, a new version of it (its rows whose keys did not
    change, and the changed rows but deleted ones) that the table is switched to.

    :param name: the catalog table (``db.table``) with the result's columns: a Delta table, or an unpartitioned
        file table (parquet, orc, json, csv).
    :param key: the columns that identify a result row (the query's grouping columns).
    """

    name: str
    key: Sequence[str]
    kind: str = "table-upsert"

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", str(TableIdentifier.parse(self.name)))
        object.__setattr__(self, "key", checked_columns(self.key, f"catalog sink {self.name}: key", required=True))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "key": list(self.key)}


@dataclass(frozen=True)
class KafkaUpsertSink:
    """A Kafka topic kept as an updating result by key, as Flink's upsert-kafka connector keeps one: each change a
    message whose key is the key columns' JSON and whose value is the row's JSON, a deleted key a tombstone (a
    message without value), so that a compacted topic keeps each key's last row.

    :param name: the name ``INSERT INTO`` uses in the plan's SQL (letters, digits, underscores).
    :param topic: the topic; compacted (``cleanup.policy=compact``), or the task warns, since a topic that deletes
        by age loses keys that did not change.
    :param key: the columns that identify a result row (the message key).
    :param conn_id: Airflow connection of the brokers (type kafka).
    """

    name: str
    topic: str
    key: Sequence[str]
    conn_id: str = "kafka_default"
    kind: str = "upsert-kafka"

    def __post_init__(self) -> None:
        checked_plain_name(self.name, "kafka sink")
        checked_topic(self.topic, f"kafka sink {self.name}")
        if not isinstance(self.conn_id, str) or not self.conn_id:
            raise SpecError(
                f"kafka sink {self.name}: conn_id must name an Airflow connection of the brokers (type kafka)"
            )
        object.__setattr__(self, "key", checked_columns(self.key, f"kafka sink {self.name}: key", required=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "topic": self.topic,
            "key": list(self.key),
            "conn_id": self.conn_id,
        }


PlanSink = TableSink | PostgresUpsertSink | TableUpsertSink | KafkaUpsertSink
#: The sinks that take an updating result, by key.
KeyedSink = PostgresUpsertSink | TableUpsertSink | KafkaUpsertSink
SINK_KINDS: dict[str, type[PlanSink]] = {
    "table": TableSink,
    "postgres-upsert": PostgresUpsertSink,
    "table-upsert": TableUpsertSink,
    "upsert-kafka": KafkaUpsertSink,
}


def sink_from_dict(data: Any, where: str) -> PlanSink:
    if not isinstance(data, dict) or data.get("kind") not in SINK_KINDS:
        raise SpecError(f"{where}: a sink must be an object whose kind is one of {', '.join(SINK_KINDS)}")
    fields = {key: value for key, value in data.items() if key != "kind"}
    try:
        return SINK_KINDS[data["kind"]](**fields)
    except TypeError as err:
        raise SpecError(f"{where}: sink {data.get('name')!r} is malformed ({err})") from None


def declared_catalog_sinks(sinks: str | Sequence[str | TableUpsertSink]) -> tuple[str | TableUpsertSink, ...]:
    """A task's ``catalog_sinks``: the names of tables appended to, and ``TableUpsertSink`` declarations of tables
    kept by key (a name alone is one table); ``TypeError`` for anything else, as a DAG file is parsed."""
    declared = (sinks,) if isinstance(sinks, str) else tuple(sinks)
    wrong = [type(sink).__name__ for sink in declared if not isinstance(sink, str | TableUpsertSink)]
    if wrong:
        raise TypeError(f"catalog_sinks must hold table names and TableUpsertSink declarations, not {wrong[0]}")
    return declared
