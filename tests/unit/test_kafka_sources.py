"""Kafka topics declared as a streaming job's sources (``core.streaming.sources``): checked as the DAG file is
parsed, each bad field in one line, and kept in a plan or a job spec as a dict that reads back the same."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.sources import KafkaTopicSource, declared_sources

COLUMNS = "order_id BIGINT, shop STRING"


def test_a_declaration_reads_back_from_its_dict() -> None:
    source = KafkaTopicSource("orders", "shop.orders-v1", COLUMNS, conn_id="kafka_prod", on_malformed="skip")
    assert source.to_dict() == {
        "name": "orders",
        "topic": "shop.orders-v1",
        "columns": COLUMNS,
        "conn_id": "kafka_prod",
        "value_format": "json",
        "on_malformed": "skip",
        "starting_offsets": "earliest",
        "kind": "kafka-topic",
    }
    assert KafkaTopicSource.from_dict(source.to_dict(), "plan") == source


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"name": "orders-1"}, "kafka source name 'orders-1' is invalid: use letters, digits and underscores"),
        ({"topic": "a topic"}, "kafka source orders: topic 'a topic' is not a Kafka topic name"),
        ({"columns": " "}, "kafka source orders: columns must give the value's columns as DDL"),
        ({"conn_id": ""}, "kafka source orders: conn_id must name an Airflow connection of the brokers"),
        ({"value_format": "avro"}, "kafka source orders: value_format 'avro' is not one of json"),
        ({"on_malformed": "ignore"}, "kafka source orders: on_malformed 'ignore' is not one of fail, skip"),
        ({"starting_offsets": "0"}, "kafka source orders: starting_offsets '0' is not one of earliest, latest"),
    ],
)
def test_each_bad_field_is_one_line(fields: dict[str, str], error: str) -> None:
    with pytest.raises(SpecError) as raised:
        KafkaTopicSource(**{"name": "orders", "topic": "orders", "columns": COLUMNS, **fields})
    assert str(raised.value).startswith(error) and "\n" not in str(raised.value)


def test_a_dict_of_another_kind_or_with_unknown_fields_is_refused() -> None:
    with pytest.raises(SpecError, match="plan: a source must be an object whose kind is kafka-topic"):
        KafkaTopicSource.from_dict({"name": "orders", "kind": "table"}, "plan")
    with pytest.raises(SpecError, match=r"plan: source 'orders' is malformed \(.*'partitions'"):
        KafkaTopicSource.from_dict(
            {"name": "orders", "topic": "t", "columns": COLUMNS, "partitions": 3, "kind": "kafka-topic"}, "plan"
        )


def test_a_tasks_sources_are_declarations_with_names_of_their_own() -> None:
    orders = KafkaTopicSource("orders", "orders", COLUMNS)
    assert declared_sources(orders) == (orders,)
    with pytest.raises(TypeError, match="sources must hold KafkaTopicSource declarations, not str"):
        declared_sources(["orders"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="sources: orders is declared twice"):
        declared_sources([orders, KafkaTopicSource("orders", "other", COLUMNS)])
