"""Kafka connections as Spark jobs reach them: the topics plans and streaming aggregations read.

The connection is the Kafka provider's (type ``kafka``, librdkafka's settings in its extra), turned into Spark's
Kafka connector options by ``core.kafka.spark_options``. Before any job work, each source's topic is looked up on
its brokers with the Kafka provider's ``KafkaAdminClientHook``: an unreachable broker or a missing topic fails the
task in one line. The options travel in the job spec, which goes to the driver in a file only its owner reads
(``SparkJobHook``), never on a command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.kafka.hooks.client import KafkaAdminClientHook
from confluent_kafka import KafkaException

from spark_tables.core.errors import SpecError
from spark_tables.core.kafka import describe, spark_options
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.hooks.connections import typed_connection

#: Seconds the brokers have to answer for a source's topic before the task fails.
METADATA_TIMEOUT_SECONDS = 15


def kafka_connection(conn_id: str, what: str) -> Any:
    """The Airflow connection ``conn_id`` of ``what``, checked to be the Kafka provider's."""
    return typed_connection(conn_id, what, ("kafka",), 'type kafka: its extra {"bootstrap.servers": "host:9092"}')


def source_connections(sources: Sequence[KafkaTopicSource]) -> dict[str, dict[str, str]]:
    """Spark's options of each connection ``sources`` name, by connection id, once their topics are found on the
    brokers; ``SpecError`` in one line naming the first source whose connection or topic is wrong."""
    connections: dict[str, dict[str, str]] = {}
    for conn_id in dict.fromkeys(source.conn_id for source in sources):
        named = [source for source in sources if source.conn_id == conn_id]
        conn = kafka_connection(conn_id, f"kafka source {named[0].name}")
        options = spark_options(conn.extra_dejson, conn_id, read_file=lambda path: Path(path).read_text())
        check_topics(conn_id, options, named)
        connections[conn_id] = options
    return connections


def check_topics(conn_id: str, options: dict[str, str], sources: Sequence[KafkaTopicSource]) -> None:
    """Each source's topic exists on the brokers of ``conn_id`` (whose Spark ``options`` describe them)."""
    try:
        topics = KafkaAdminClientHook(kafka_config_id=conn_id).get_conn.list_topics(timeout=METADATA_TIMEOUT_SECONDS)
    except KafkaException as err:
        reason = err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
        raise SpecError(
            f"kafka source {sources[0].name}: the brokers of connection {conn_id!r} at {describe(options)} did not "
            f"answer within {METADATA_TIMEOUT_SECONDS} s ({reason}): check the connection's bootstrap.servers"
        ) from None
    for source in sources:
        if source.topic not in topics.topics:
            raise SpecError(
                f"kafka source {source.name}: topic {source.topic!r} does not exist on {describe(options)} "
                f"(connection {conn_id!r}): create it, or name another"
            )
