"""Sources a streaming job reads besides the catalog's tables: Kafka topics.

A DAG author declares a topic in the operator (``KafkaTopicSource``) under the name its SQL reads (``FROM orders``);
any other name a plan reads is a catalog table. The declaration keeps the connection id, never its settings: the
Airflow side resolves the connection when the job runs (``hooks.kafka``). Why a declaration and not a catalog table
``USING kafka``: docs/kafka-and-object-storage.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import checked_plain_name
from spark_tables.core.kafka import checked_topic

#: The value formats a topic's messages may have.
VALUE_FORMATS = ("json",)
#: What a message whose value does not parse does: fails the query, naming it, or is counted and left out.
ON_MALFORMED = ("fail", "skip")
#: Where a query's first run starts reading; later runs go on from the offsets in its checkpoint.
STARTING_OFFSETS = ("earliest", "latest")


@dataclass(frozen=True)
class KafkaTopicSource:
    """A Kafka topic read as a stream of inserts: each message's value (JSON) parsed into ``columns``.

    :param name: the name the job's SQL reads it by (letters, digits, underscores).
    :param topic: the topic.
    :param columns: the value's columns as Spark SQL DDL (``"order_id BIGINT, shop STRING, amount DOUBLE"``).
    :param conn_id: Airflow connection of the brokers (type kafka: librdkafka's settings in its extra).
    :param value_format: ``json``.
    :param on_malformed: ``fail`` (the query fails, naming the topic, partition and offset) or ``skip`` (the
        message is left out and counted, in the task's XCom).
    :param starting_offsets: ``earliest`` or ``latest``, for a query's first run; offsets are kept in its
        checkpoint, so that each message is read once into idempotent sinks.
    """

    name: str
    topic: str
    columns: str
    conn_id: str = "kafka_default"
    value_format: str = "json"
    on_malformed: str = "fail"
    starting_offsets: str = "earliest"
    kind: str = "kafka-topic"

    def __post_init__(self) -> None:
        checked_plain_name(self.name, "kafka source")
        where = f"kafka source {self.name}"
        checked_topic(self.topic, where)
        if not isinstance(self.columns, str) or not self.columns.strip():
            raise SpecError(f"{where}: columns must give the value's columns as DDL: 'id BIGINT, name STRING'")
        if not isinstance(self.conn_id, str) or not self.conn_id:
            raise SpecError(f"{where}: conn_id must name an Airflow connection of the brokers (type kafka)")
        for option, value, allowed in (
            ("value_format", self.value_format, VALUE_FORMATS),
            ("on_malformed", self.on_malformed, ON_MALFORMED),
            ("starting_offsets", self.starting_offsets, STARTING_OFFSETS),
        ):
            if value not in allowed:
                raise SpecError(f"{where}: {option} {value!r} is not one of {', '.join(allowed)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str) -> KafkaTopicSource:
        if not isinstance(data, dict) or data.get("kind") != "kafka-topic":
            raise SpecError(f"{where}: a source must be an object whose kind is kafka-topic")
        try:
            return cls(**data)
        except TypeError as err:
            raise SpecError(f"{where}: source {data.get('name')!r} is malformed ({err})") from None


def declared_sources(sources: KafkaTopicSource | Sequence[KafkaTopicSource]) -> tuple[KafkaTopicSource, ...]:
    """A task's ``sources``, one name each; ``TypeError`` for anything else, as a DAG file is parsed."""
    declared = (sources,) if isinstance(sources, KafkaTopicSource) else tuple(sources)
    wrong = [type(source).__name__ for source in declared if not isinstance(source, KafkaTopicSource)]
    if wrong:
        raise TypeError(f"sources must hold KafkaTopicSource declarations, not {wrong[0]}")
    names = [source.name for source in declared]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise TypeError(f"sources: {twice[0]} is declared twice: give each source its own name")
    return declared
