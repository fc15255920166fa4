"""The tests' Kafka broker: a real one on loopback, which scripts/test.sh starts once for the whole run
(scripts/kafka_broker.py) and names in ``SPARK_TABLES_TEST_KAFKA``; topics of each test's own on it, and messages
sent to them and read back with confluent-kafka (the Kafka provider's client)."""

from __future__ import annotations

import itertools
import json
import os
import uuid
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: Seconds a topic's creation or a send may take on the broker.
TIMEOUT_SECONDS = 30


def broker() -> str:
    """The broker's bootstrap address, host:port."""
    address = os.environ.get("SPARK_TABLES_TEST_KAFKA")
    assert address, "no Kafka broker: run the tests with scripts/test.sh, which starts one (SPARK_TABLES_TEST_KAFKA)"
    return address


def new_topic(prefix: str = "topic", *, partitions: int = 1, compacted: bool = False) -> str:
    """A topic no other test uses."""
    topic = f"{prefix}-{uuid.uuid4().hex[:12]}"
    config = {"cleanup.policy": "compact"} if compacted else {}
    admin = AdminClient({"bootstrap.servers": broker()})  # kept until the topic is made: its futures need it
    for future in admin.create_topics([NewTopic(topic, partitions, 1, config=config)]).values():
        future.result(TIMEOUT_SECONDS)
    return topic


def send(topic: str, values: Iterable[Any], *, keys: Iterable[Any] | None = None) -> None:
    """Send each value (a dict as JSON, bytes or text as they are, None as a tombstone) to ``topic``, in order, and
    wait until the broker has them all."""
    producer = Producer({"bootstrap.servers": broker(), "enable.idempotence": True})
    errors: list[Any] = []
    for value, key in zip(values, itertools.repeat(None) if keys is None else keys, strict=False):
        if isinstance(value, dict):
            value = json.dumps(value)
        producer.produce(
            topic, value=value, key=key, on_delivery=lambda error, _: errors.append(error) if error else None
        )
    assert producer.flush(TIMEOUT_SECONDS) == 0, f"messages to {topic} not delivered"
    assert not errors, errors


def messages(topic: str) -> list[tuple[Any, Any]]:
    """Every message ``topic`` holds now, partition by partition in offset order: (key, value), each JSON read back
    (None: no key, or a tombstone)."""
    consumer = Consumer({"bootstrap.servers": broker(), "group.id": f"tests-{uuid.uuid4().hex}"})
    try:
        partitions = consumer.list_topics(topic, timeout=TIMEOUT_SECONDS).topics[topic].partitions
        read: list[tuple[Any, Any]] = []
        for partition in sorted(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_SECONDS)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, partition, low)])
            offset = low
            while offset < high:
                message = consumer.poll(TIMEOUT_SECONDS)
                assert message is not None, f"{topic}[{partition}]: no message at offset {offset} of {high}"
                assert message.error() is None, message.error()
                read.append(
                    tuple(None if part is None else json.loads(part) for part in (message.key(), message.value()))
                )
                offset = message.offset() + 1
        return read
    finally:
        consumer.close()
