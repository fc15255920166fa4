"""Kafka connections as Spark jobs reach them: the topics plans and streaming aggregations read and write.

The connection is the Kafka provider's (type ``kafka``, librdkafka's settings in its extra), turned into Spark's
Kafka connector options by ``core.kafka.spark_options``. Before any job work, each source's and sink's topic is
looked up on its brokers with the Kafka provider's ``KafkaAdminClientHook``: an unreachable broker or a missing topic
fails the task in one line; a sink's topic that is not compacted is a warning. The options travel in the job spec,
which goes to the driver in a file only its owner reads (``SparkJobHook``), never on a command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow.providers.apache.kafka.hooks.client import KafkaAdminClientHook
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType

from spark_tables.core.errors import SpecError
from spark_tables.core.kafka import describe, spark_options
from spark_tables.core.streaming.sinks import KafkaUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.hooks.connections import typed_connection

#: Seconds the brokers have to answer for a source's topic before the task fails.
METADATA_TIMEOUT_SECONDS = 15


def kafka_connection(conn_id: str, what: str) -> Any:
    """The Airflow connection ``conn_id`` of ``what``, checked to be the Kafka provider's."""
    return typed_connection(conn_id, what, ("kafka",), 'type kafka: its extra {"bootstrap.servers": "host:9092"}')


@dataclass(frozen=True)
class KafkaTopics:
    """What the Airflow side found of a job's Kafka topics: Spark's options of each connection its sources and
    sinks name, by connection id (with passwords: never logged); and a warning for each upsert sink whose topic is
    not compacted (it deletes messages by age or size, so a key that stops changing is lost from it), for the task
    log and EXPLAIN: a warning, not a failure."""

    connections: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    warnings: tuple[str, ...] = ()


def kafka_topics(sources: Sequence[KafkaTopicSource], sinks: Sequence[KafkaUpsertSink] = ()) -> KafkaTopics:
    """The connections of the sources' and sinks' topics, once each topic is found on its brokers (their topics
    listed once a connection); ``SpecError`` in one line naming the first source or sink whose connection or topic
    is wrong."""
    declared: list[KafkaTopicSource | KafkaUpsertSink] = [*sources, *sinks]
    connections: dict[str, dict[str, str]] = {}
    warnings: list[str] = []
    for conn_id in dict.fromkeys(given.conn_id for given in declared):
        named = [given for given in declared if given.conn_id == conn_id]
        conn = kafka_connection(conn_id, _what(named[0]))
        options = spark_options(conn.extra_dejson, conn_id, read_file=lambda path: Path(path).read_text())
        admin = KafkaAdminClientHook(kafka_config_id=conn_id).get_conn
        topics = _topics(admin, conn_id, options, _what(named[0]))
        for given in named:
            if given.topic not in topics:
                compacted = ", compacted (cleanup.policy=compact)" if isinstance(given, KafkaUpsertSink) else ""
                raise SpecError(
                    f"{_what(given)}: topic {given.topic!r} does not exist on {describe(options)} (connection "
                    f"{conn_id!r}): create it{compacted}, or name another"
                )
        sink_topics = [given for given in named if isinstance(given, KafkaUpsertSink)]
        warnings.extend(_compaction_warnings(admin, sink_topics))
        connections[conn_id] = options
    return KafkaTopics(connections, tuple(warnings))


def _what(given: KafkaTopicSource | KafkaUpsertSink) -> str:
    return f"kafka {'sink' if isinstance(given, KafkaUpsertSink) else 'source'} {given.name}"


def _topics(admin: Any, conn_id: str, options: dict[str, str], what: str) -> set[str]:
    """The topics on the brokers of ``conn_id``; ``SpecError`` naming ``what`` when they do not answer in time."""
    try:
        listed = admin.list_topics(timeout=METADATA_TIMEOUT_SECONDS)
    except KafkaException as err:
        reason = err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
        raise SpecError(
            f"{what}: the brokers of connection {conn_id!r} at {describe(options)} did not answer within "
            f"{METADATA_TIMEOUT_SECONDS} s ({reason}): check the connection's bootstrap.servers"
        ) from None
    return set(listed.topics)


def _compaction_warnings(admin: Any, sinks: Sequence[KafkaUpsertSink]) -> list[str]:
    """A warning for each sink whose topic's ``cleanup.policy`` does not compact."""
    if not sinks:
        return []
    resources = [ConfigResource(ResourceType.TOPIC, sink.topic) for sink in sinks]
    described = admin.describe_configs(resources)  # a future of each resource's settings, by resource
    warnings = []
    for sink, resource in zip(sinks, resources, strict=True):
        policy = described[resource].result(METADATA_TIMEOUT_SECONDS)["cleanup.policy"].value or ""
        if "compact" not in policy.split(","):
            warnings.append(
                f"kafka sink {sink.name}: topic {sink.topic} is not compacted (cleanup.policy={policy}): it deletes "
                "old messages, and with them the keys that stopped changing; set cleanup.policy=compact"
            )
    return warnings
