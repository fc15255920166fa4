"""A Kafka topic as a stream of inserts (``jobs.streaming.sources.kafka_topic``), on the tests' real broker: values
parsed into the declared columns, tombstones no rows, offsets kept in the checkpoint, and a malformed value failing
the query in one line or left out and counted; a plan compiled, explained and executed from a topic, and a
streaming aggregation reading one by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import Row, SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import one_line
from spark_tables.core.kafka import spark_options
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.changelog import ROW_KIND
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.jobs.streaming.progress import observed_metrics
from spark_tables.jobs.streaming.sources.kafka_topic import KafkaTopicStream, malformed_metric
from spark_tables.tasks.sql_reader import read_plan_statement
from tests.kafka import broker, new_topic, send
from tests.spark.postgres import PG, run_sql

COLUMNS = "order_id BIGINT, shop STRING, amount DOUBLE"
#: The processing time of the plans' and aggregations' runs: any instant works.
T0 = 1_800_000_000_000


def _run(spark: SparkSession, source: KafkaTopicSource, checkpoint: Path) -> tuple[list[tuple], list[dict]]:
    """One available-now run of ``source``: the rows its batches held, by order id, and the batches' progress."""
    stream = KafkaTopicStream(source, spark_options({"bootstrap.servers": broker()}, "kafka_default")).changes(spark)
    assert stream.insert_only
    rows: list[Row] = []
    query = (
        stream.changes.writeStream.foreachBatch(lambda batch, _: rows.extend(batch.collect()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()
    assert all(row[ROW_KIND] == 0 for row in rows), "every row an insert"
    return sorted(tuple(row)[:-1] for row in rows), query.recentProgress


def test_a_topics_json_values_are_rows_of_the_declared_columns_read_once(spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic("orders")
    send(
        topic,
        [{"order_id": 1, "shop": "a", "amount": 2.5}, None, {"order_id": 2, "shop": "b"}],
        keys=[b"1", b"1", b"2"],
    )
    source = KafkaTopicSource("orders", topic, COLUMNS)
    checkpoint = tmp_path / "checkpoint"
    rows, _ = _run(spark, source, checkpoint)
    assert rows == [(1, "a", 2.5), (2, "b", None)], "the tombstone is no row; a field left out is null"

    send(topic, [{"order_id": 3, "shop": "a", "amount": 1.0}])
    again, _ = _run(spark, source, checkpoint)
    assert again == [(3, "a", 1.0)], "the second run goes on from the offsets in its checkpoint"


def test_a_malformed_value_fails_the_query_in_one_line_naming_where_it_is(spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic("orders")
    send(topic, [{"order_id": 1, "shop": "a", "amount": 2.5}, "not json {", {"order_id": 3}])
    with pytest.raises(StreamingQueryException) as raised:
        _run(spark, KafkaTopicSource("orders", topic, COLUMNS), tmp_path / "checkpoint")
    line = one_line(raised.value)
    assert (
        f"kafka source orders: the message of topic {topic} at partition 0 offset 1 is not JSON of the declared "
        "columns: not json { (on_malformed='skip' leaves such messages out and counts them)"
    ) in line, line
    assert "\n" not in line


def test_skipped_malformed_values_are_counted(spark: SparkSession, tmp_path: Path) -> None:
    topic = new_topic("orders")
    send(topic, ["[1, 2", {"order_id": 2, "shop": "b", "amount": 1.0}, {"order_id": "three"}, {"order_id": 4}])
    source = KafkaTopicSource("orders", topic, COLUMNS, on_malformed="skip")
    rows, progress = _run(spark, source, tmp_path / "checkpoint")
    assert rows == [(2, "b", 1.0), (4, None, None)]
    counted = [observed_metrics(batch, malformed_metric("orders")) for batch in progress]
    assert sum(metrics["malformed"] for metrics in counted if metrics) == 2


PG_SCHEMA = "kafka_plan_spark_tests"
FIRST_ORDERS = PostgresUpsertSink(
    name="first_orders", conn_id="pg", table=f"{PG_SCHEMA}.first_orders", key=("order_id",)
)
COUNTS = PostgresUpsertSink(name="shop_counts", conn_id="pg", table=f"{PG_SCHEMA}.shop_counts", key=("shop",))
#: Each order's first message: a deduplication without TTL, on Spark's own dropDuplicates.
FIRST = """
    INSERT INTO first_orders
    SELECT order_id, shop, amount
    FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn FROM orders)
    WHERE rn = 1
"""


@pytest.fixture
def sink_tables() -> Iterator[None]:
    run_sql(
        f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE",
        f"CREATE SCHEMA {PG_SCHEMA}",
        f"CREATE TABLE {FIRST_ORDERS.table} (order_id int PRIMARY KEY, shop text, amount int)",
        f"CREATE TABLE {COUNTS.table} (shop text PRIMARY KEY, orders bigint, total bigint)",
    )
    yield
    run_sql(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")


def test_a_plan_from_a_topic_is_compiled_explained_and_executed_from_its_checkpoint(
    spark: SparkSession, tmp_path: Path, sink_tables: None
) -> None:
    """A compiled plan reading a Kafka topic: the plan keeps the declared source (its connection id, no setting of
    it), EXPLAIN names the topic, and a second execution reads only the messages sent since."""
    topic = new_topic("orders")
    source = KafkaTopicSource("orders", topic, "order_id INT, shop STRING, amount INT")
    options = PlanOptions(
        configuration={"table.exec.state.ttl": "0 ms"},
        postgres_sinks=(FIRST_ORDERS,),
        connections={FIRST_ORDERS.name: dict(PG)},
        sources=(source,),
        kafka_connections={"kafka_default": spark_options({"bootstrap.servers": broker()}, "kafka_default")},
        checkpoints=str(tmp_path / "checkpoints"),
    )
    plan_file = tmp_path / "first_orders.json"

    def run(statement: str) -> PlanResult:
        return run_plan_statement(spark, read_plan_statement(statement), options, Cancellation(), FixedClock(T0))

    run(f"COMPILE PLAN '{plan_file}' FOR {FIRST}")
    [scan] = [node for node in json.loads(plan_file.read_text())["nodes"] if node["id"] == 1]
    assert scan["source"] == source.to_dict() and broker() not in plan_file.read_text()
    explained = run(f"EXPLAIN PLAN '{plan_file}'").explain["text"]
    fields = "fields=[order_id, shop, amount]"
    assert f"KafkaTopicSource(topic=[{topic}], format=[json], on_malformed=[fail], {fields})" in explained

    send(topic, [{"order_id": 1, "shop": "a", "amount": 10}, {"order_id": 2, "shop": "a", "amount": 5}])
    send(topic, [{"order_id": 1, "shop": "b", "amount": 99}])
    first = run(f"EXECUTE PLAN '{plan_file}'").execute["queries"][0]
    assert first["input_rows"] == 3 and _rows(FIRST_ORDERS) == [(1, "a", 10), (2, "a", 5)]
    send(topic, [{"order_id": 3, "shop": "b", "amount": 7}, {"order_id": 2, "shop": "c", "amount": 1}])
    second = run(f"EXECUTE PLAN '{plan_file}'").execute["queries"][0]
    assert second["input_rows"] == 2, "only the messages sent since: the offsets are in the checkpoint"
    assert _rows(FIRST_ORDERS) == [(1, "a", 10), (2, "a", 5), (3, "b", 7)], "order 2 again: a duplicate"


def _rows(sink: PostgresUpsertSink) -> list[tuple]:
    return sorted(run_sql(f"SELECT * FROM {sink.table}"))


def test_a_streaming_aggregation_reads_a_topic_by_name_and_counts_what_it_skips(
    spark: SparkSession, tmp_path: Path, sink_tables: None
) -> None:
    """The aggregation's SQL reads the declared topic by its name; with on_malformed="skip", the query's report
    counts the messages left out, by source. The topic's view goes with the job: left in the session, it would hide
    a catalog table of its name from the session's next job."""
    topic = new_topic("orders")
    job = StreamingAggregationJob(
        query="SELECT shop, count(*) AS orders, sum(amount) AS total FROM orders GROUP BY shop",
        sink=COUNTS,
        checkpoint=str(tmp_path / "checkpoint"),
        options=StreamingOptions(
            connections={COUNTS.name: dict(PG)},
            sources=(KafkaTopicSource("orders", topic, "order_id INT, shop STRING, amount INT", on_malformed="skip"),),
            kafka_connections={"kafka_default": spark_options({"bootstrap.servers": broker()}, "kafka_default")},
        ),
    )
    send(topic, [{"order_id": 1, "shop": "a", "amount": 3}, "{oops", {"order_id": 2, "shop": "a", "amount": 4}])
    first = run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0)).query
    assert (first["input_rows"], first["malformed_skipped"]) == (3, {"orders": 1})
    assert _rows(COUNTS) == [("a", 2, 7)]
    send(topic, [{"order_id": 3, "shop": "b", "amount": 1}])
    second = run_streaming_aggregation(spark, job, Cancellation(), FixedClock(T0)).query
    assert second["input_rows"] == 1 and "malformed_skipped" not in second
    assert _rows(COUNTS) == [("a", 2, 7), ("b", 1, 1)]
    assert "orders" not in {table.name for table in spark.catalog.listTables() if table.isTemporary}
