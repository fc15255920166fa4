"""Kafka topics declared as upsert sinks (``KafkaUpsertSink``, Flink's upsert-kafka): checked as the DAG file is
parsed, each bad field in one line, and kept in a plan or a job spec as a dict that reads back the same."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.sinks import KafkaUpsertSink, sink_from_dict


def test_a_declaration_reads_back_from_its_dict_and_in_plan_options() -> None:
    sink = KafkaUpsertSink("shop_counts", "shop.counts", key=("shop",), conn_id="kafka_prod")
    assert sink.to_dict() == {
        "name": "shop_counts",
        "kind": "upsert-kafka",
        "topic": "shop.counts",
        "key": ["shop"],
        "conn_id": "kafka_prod",
    }
    assert sink_from_dict(sink.to_dict(), "plan") == sink
    options = PlanOptions(kafka_sinks=(sink,))
    assert PlanOptions.from_dict(options.to_dict()).kafka_sinks == (sink,)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"name": "shop-counts"}, "kafka sink name 'shop-counts' is invalid: use letters, digits and underscores"),
        ({"topic": "a/b"}, "kafka sink counts: topic 'a/b' is not a Kafka topic name (letters, digits, . _ -)"),
        ({"key": ()}, "kafka sink counts: key: give at least one column"),
        ({"conn_id": ""}, "kafka sink counts: conn_id must name an Airflow connection of the brokers (type kafka)"),
    ],
)
def test_each_bad_field_is_one_line(fields: dict, error: str) -> None:
    with pytest.raises(SpecError) as raised:
        KafkaUpsertSink(**{"name": "counts", "topic": "counts", "key": ("shop",), **fields})
    assert str(raised.value) == error
