"""Kafka sources' connections resolved on the Airflow side (``hooks.kafka``) against the tests' real broker: each
source's topic looked up before any job work, a missing topic or an unreachable broker failing in one line."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.hooks import kafka
from tests.kafka import broker, new_topic

pytestmark = pytest.mark.integration

COLUMNS = "order_id BIGINT, shop STRING"


@pytest.fixture
def kafka_connection(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Define Kafka connection ``conn_id`` at ``servers`` (the tests' broker by default), as AIRFLOW_CONN_*."""

    def define(conn_id: str, servers: str | None = None, **extra: Any) -> None:
        extra = {"bootstrap.servers": servers or broker(), "group.id": "airflow-consumers", **extra}
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "kafka", "extra": extra}))

    return define


def test_each_connection_is_resolved_once_its_topics_are_found(kafka_connection: Any) -> None:
    kafka_connection("kafka_default")
    kafka_connection("kafka_audit", **{"client.id": "spark-tables"})
    orders, shops, events = new_topic("orders"), new_topic("shops"), new_topic("events")
    sources = [
        KafkaTopicSource("orders", orders, COLUMNS),
        KafkaTopicSource("shops", shops, COLUMNS),
        KafkaTopicSource("events", events, COLUMNS, conn_id="kafka_audit"),
    ]
    assert kafka.source_connections(sources) == {
        "kafka_default": {"kafka.bootstrap.servers": broker()},
        "kafka_audit": {"kafka.bootstrap.servers": broker(), "kafka.client.id": "spark-tables"},
    }


def test_a_missing_topic_is_named_in_one_line(kafka_connection: Any) -> None:
    kafka_connection("kafka_default")
    sources = [
        KafkaTopicSource("orders", new_topic("orders"), COLUMNS),
        KafkaTopicSource("shops", "no-such-topic", COLUMNS),
    ]
    with pytest.raises(SpecError) as raised:
        kafka.source_connections(sources)
    assert str(raised.value) == (
        f"kafka source shops: topic 'no-such-topic' does not exist on {broker()} (PLAINTEXT) (connection "
        "'kafka_default'): create it, or name another"
    )


def test_an_unreachable_broker_fails_in_one_line(kafka_connection: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    kafka_connection("kafka_default", closed)
    monkeypatch.setattr(kafka, "METADATA_TIMEOUT_SECONDS", 2)
    with pytest.raises(SpecError) as raised:
        kafka.source_connections([KafkaTopicSource("orders", "orders", COLUMNS)])
    message = str(raised.value)
    assert message.startswith(
        f"kafka source orders: the brokers of connection 'kafka_default' at {closed} (PLAINTEXT) did not answer within "
        "2 s ("
    ), message
    assert message.endswith("): check the connection's bootstrap.servers") and "\n" not in message
