"""Kafka sources' and sinks' connections resolved on the Airflow side (``hooks.kafka``) against the tests' real
broker: each topic looked up before any job work, a missing topic or an unreachable broker failing in one line, a
sink's topic that is not compacted a warning; a lookup join's Kafka probe found the same way."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS
from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.streaming.sinks import KafkaUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.hooks import kafka
from spark_tables.operators.lookup import SparkLookupJoinOperator
from tests.kafka import broker, new_topic
from tests.unit.task_context import task_context

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
    assert kafka.kafka_topics(sources).connections == {
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
        kafka.kafka_topics(sources)
    assert str(raised.value) == (
        f"kafka source shops: topic 'no-such-topic' does not exist on {broker()} (PLAINTEXT) (connection "
        "'kafka_default'): create it, or name another"
    )


def test_a_sink_topic_that_is_not_compacted_is_a_warning_and_a_missing_one_fails(kafka_connection: Any) -> None:
    kafka_connection("kafka_default")
    compacted, by_age = new_topic("counts", compacted=True), new_topic("totals")
    source = KafkaTopicSource("orders", new_topic("orders"), COLUMNS)
    sinks = [KafkaUpsertSink("counts", compacted, key=("shop",)), KafkaUpsertSink("totals", by_age, key=("shop",))]
    found = kafka.kafka_topics([source], sinks)
    assert found.connections == {"kafka_default": {"kafka.bootstrap.servers": broker()}}
    assert found.warnings == (
        f"kafka sink totals: topic {by_age} is not compacted (cleanup.policy=delete): it deletes old messages, and "
        "with them the keys that stopped changing; set cleanup.policy=compact",
    )
    with pytest.raises(SpecError) as raised:
        kafka.kafka_topics([source], [KafkaUpsertSink("counts", "no-such-counts", key=("shop",))])
    assert str(raised.value) == (
        f"kafka sink counts: topic 'no-such-counts' does not exist on {broker()} (PLAINTEXT) (connection "
        "'kafka_default'): create it, compacted (cleanup.policy=compact), or name another"
    )


def test_an_unreachable_broker_fails_in_one_line(kafka_connection: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    kafka_connection("kafka_default", closed)
    monkeypatch.setattr(kafka, "METADATA_TIMEOUT_SECONDS", 2)
    with pytest.raises(SpecError) as raised:
        kafka.kafka_topics([KafkaTopicSource("orders", "orders", COLUMNS)])
    message = str(raised.value)
    assert message.startswith(
        f"kafka source orders: the brokers of connection 'kafka_default' at {closed} (PLAINTEXT) did not answer within "
        "2 s ("
    ), message
    assert message.endswith("): check the connection's bootstrap.servers") and "\n" not in message


def test_a_lookup_joins_kafka_probe_is_found_before_its_job_and_its_connection_goes_in_the_job(
    kafka_connection: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The operator finds the probe's topic as plans and aggregations find theirs, adds Spark's Kafka connector to its
    job's jars and hands the connection's options to the job, in the spec file (``holds_connections``)."""
    kafka_connection("kafka_default")
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__HOME", str(tmp_path))
    monkeypatch.setenv(
        "AIRFLOW_CONN_CRM", json.dumps({"conn_type": "postgres", "host": "db", "schema": "crm", "login": "reader"})
    )
    table = LookupTable(name="customers", conn_id="crm", table="crm.customers", key=("id",))

    def operator(topic: str) -> SparkLookupJoinOperator:
        return SparkLookupJoinOperator(
            task_id="enrich",
            lookup=table,
            lookup_options={"lookup.cache": "NONE"},
            probe_stream=KafkaTopicSource("clicks", topic, "id INT, page STRING"),
            on="id",
            output_table="db.enriched",
            checkpoint="file:///checkpoints/enrich",
        )

    found = operator(new_topic("clicks"))
    job = found.build_job(task_context())
    assert job.kafka_connections == {"kafka_default": {"kafka.bootstrap.servers": broker()}}
    assert JobSpec(job=job, result_uri="file:///r.json").holds_connections
    assert found.connector_jars(job) == list(KAFKA_CONNECTOR_JARS)
    with pytest.raises(SpecError) as raised:
        operator("no-such-clicks").build_job(task_context())
    assert str(raised.value) == (
        f"kafka source clicks: topic 'no-such-clicks' does not exist on {broker()} (PLAINTEXT) (connection "
        "'kafka_default'): create it, or name another"
    )
