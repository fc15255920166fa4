"""Kafka topics as upsert sinks (``jobs.streaming.sinks.kafka_upsert``, Flink's upsert-kafka), on the tests' real
broker: a change a message keyed by the key columns' JSON, a delete a tombstone, a replayed batch sent again as it
was; a compiled plan and a buffered streaming aggregation writing into a compacted topic."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import SpecError
from spark_tables.core.kafka import spark_options
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import KafkaUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.tasks.sql_reader import read_plan_statement
from tests.kafka import broker, messages, new_topic, send
from tests.spark.test_plan_sinks import TOTALS, TOTALS_CHANGES, Changelog

pytestmark = pytest.mark.spark

#: The processing time of the plans' and aggregations' runs: any instant works.
T0 = 1_800_000_000_000


def _options() -> dict[str, str]:
    return spark_options({"bootstrap.servers": broker()}, "kafka_default")


def test_each_change_is_a_message_by_key_a_delete_a_tombstone_and_a_replayed_batch_is_sent_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    topic = new_topic("totals", compacted=True)
    sink = KafkaUpsertSink("totals", topic, key=("id",))
    changes = Changelog(spark, tmp_path, TOTALS)
    changes.add(*TOTALS_CHANGES)
    report = changes.run(sink, _options())
    sent = [
        ({"id": 1}, {"id": 1, "name": "a", "amount": 10}),
        ({"id": 1}, {"id": 1, "name": "a2", "amount": 11}),  # its -U is no message: the +U replaces the value
        ({"id": 2}, {"id": 2, "name": "b", "amount": 20}),
        ({"id": 3}, {"id": 3, "name": "c", "amount": 30}),
        ({"id": 3}, None),
        ({"id": 9}, None),
    ]
    assert messages(topic) == sent
    assert (report["messages_sent"], report["rows_upserted"], report["rows_deleted"]) == (6, 4, 2)
    changes.forget_last_commit()
    again = changes.run(sink, _options())
    assert messages(topic) == sent + sent, "at least once: the batch sent again, in the same order"
    assert again["messages_sent"] == 6


def test_a_query_without_the_key_columns_is_refused_before_it_starts(spark: SparkSession, tmp_path: Path) -> None:
    changes = Changelog(spark, tmp_path, TOTALS)
    with pytest.raises(SpecError, match="kafka sink totals: the query gives no key column shop"):
        changes.run(KafkaUpsertSink("totals", new_topic("totals"), key=("shop",)), _options())


def test_a_plan_compiled_into_a_kafka_sink_sends_each_keys_changes(spark: SparkSession, tmp_path: Path) -> None:
    """A plan from a topic into a topic: the count by shop upserted by key, EXPLAIN naming the sink's warning the
    Airflow side found."""
    orders, counts = new_topic("orders"), new_topic("shop-counts", compacted=True)
    sink = KafkaUpsertSink("shop_counts", counts, key=("shop",))
    warning = f"kafka sink shop_counts: topic {counts} is compacted (a warning the task's hook would give)"
    options = PlanOptions(
        configuration={"table.exec.state.ttl": "0 ms"},
        kafka_sinks=(sink,),
        sources=(KafkaTopicSource("orders", orders, "order_id INT, shop STRING, amount INT"),),
        kafka_connections={"kafka_default": _options()},
        checkpoints=str(tmp_path / "checkpoints"),
        sink_warnings=(warning,),
    )
    plan_file = tmp_path / "counts.json"

    def run(statement: str) -> dict:
        result = run_plan_statement(spark, read_plan_statement(statement), options, Cancellation(), FixedClock(T0))
        return result.to_dict()

    query = "INSERT INTO shop_counts SELECT shop, count(*) AS orders, sum(amount) AS total FROM orders GROUP BY shop"
    run(f"COMPILE PLAN '{plan_file}' FOR {query}")
    assert '"kind": "upsert-kafka"' in plan_file.read_text() and broker() not in plan_file.read_text()
    assert warning in run(f"EXPLAIN PLAN '{plan_file}'")["explain"]["warnings"]
    send(orders, [{"order_id": 1, "shop": "a", "amount": 3}, {"order_id": 2, "shop": "b", "amount": 4}])
    first = run(f"EXECUTE PLAN '{plan_file}'")["execute"]["queries"][0]
    assert sorted(messages(counts), key=str) == [
        ({"shop": "a"}, {"shop": "a", "orders": 1, "total": 3}),
        ({"shop": "b"}, {"shop": "b", "orders": 1, "total": 4}),
    ]
    assert first["messages_sent"] == 2
    send(orders, [{"order_id": 3, "shop": "a", "amount": 5}])
    run(f"EXECUTE PLAN '{plan_file}'")
    assert messages(counts)[-1] == ({"shop": "a"}, {"shop": "a", "orders": 2, "total": 8})


def test_a_buffered_aggregation_sends_one_message_a_key_per_flush(spark: SparkSession, tmp_path: Path) -> None:
    """FLIP-365 in front of a Kafka sink: the buffer in Spark's state store, flushed at the end of the run, one
    message a key however many times the key changed."""
    orders, counts = new_topic("orders"), new_topic("shop-counts", compacted=True)
    job = StreamingAggregationJob(
        query="SELECT shop, count(*) AS orders, sum(amount) AS total FROM orders GROUP BY shop",
        sink=KafkaUpsertSink("shop_counts", counts, key=("shop",)),
        checkpoint=str(tmp_path / "checkpoint"),
        options=StreamingOptions(
            configuration={"execution.flush.max-interval": "1 h"},
            sources=(KafkaTopicSource("orders", orders, "order_id INT, shop STRING, amount INT"),),
            kafka_connections={"kafka_default": _options()},
        ),
    )
    send(orders, [{"order_id": n, "shop": "a", "amount": n} for n in range(1, 6)] + [{"order_id": 9, "shop": "b"}])
    report = run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0)).query
    assert sorted(messages(counts), key=str) == [
        ({"shop": "a"}, {"shop": "a", "orders": 5, "total": 15}),
        ({"shop": "b"}, {"shop": "b", "orders": 1, "total": None}),
    ]
    assert report["messages_sent"] == 2 and report["buffer"]["records_emitted"] == 2
