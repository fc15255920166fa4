"""FLIP-292's Example 2 from Kafka topics: the compiled plan on Spark's own operators against Spark's own query on
the same topics, in one process run, on a real broker.

The stream is ``plan_state_ttl.py``'s throughput stream (part b): order logistics tracking, ``orders(order_id,
gmt_create)`` joined on ``order_id`` with the SHIPPED rows of ``logistics(order_line_id, order_id, product_id,
shipment_status, gmt_modified)``, about ``--rows`` logistics rows, each row a JSON message of a topic of its table
(one partition each). Sides, in one local[2] SparkSession with Spark's Kafka connector:

- ``plan``: the plan compiled from Example 2's ``INSERT`` with the two topics declared as ``KafkaTopicSource``s (no
  TTL: ``table.exec.state.ttl = 0 ms``), executed (``EXECUTE PLAN``) into a parquet catalog table: Spark's Kafka
  source, ``from_json`` into the declared columns, Spark's stream-stream join;
- ``builtin``: Spark's own query on the same topics, as a Spark user writes it: ``readStream.format("kafka")``,
  ``from_json`` of each value, ``orders.join(shipped, "order_id")``, written by foreachBatch into a parquet folder.

Each run reads both topics from the earliest offset (a checkpoint of its own), available-now, in one micro-batch.
The sides rotate over ``--rounds`` rounds after an unmeasured warm-up of each. Reported: input rows (the messages of
both topics) per second of the query's processing (the sum of its batches' ``triggerExecution``), wall time, the
progress's phases, medians, and the ratio plan/built-in; the target is at least 0.8. Checked: every side writes the
same rows, one per SHIPPED line.

A broker: ``SPARK_TABLES_TEST_KAFKA`` (host:port) if set, else one started for the run from the jars
``scripts/setup.sh`` fetched (``scripts/kafka_broker.py``) and stopped at its end.

Usage::

    .venv/bin/python bench/kafka_plan.py [--rows 300000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Producer
from harness import kafka_broker, machine_note, new_topic, reproduce_command, working_in
from plan_state_ttl import (
    EXAMPLE_2,
    LOGISTICS_COLUMNS,
    ORDERS_COLUMNS,
    SEED,
    SINK_COLUMNS,
    TARGET_RATIO,
    Progress,
    make_stream,
    rotated_rounds,
    start_spark,
    throughput_table,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS
from spark_tables.core.kafka import spark_options
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.tasks.sql_reader import read_plan_statement

APP_NAME = "spark_tables-bench-kafka-plan"
#: Steps of the stream (half a day each), as plan_state_ttl.py's throughput stream has them.
STEPS = 30


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000, help="logistics rows of the stream (300,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every side (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if min(args.rows, args.rounds) < 1:
        parser.error("--rows and --rounds must be at least 1")
    return args


def send_all(servers: str, topic: str, rows: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 50, "batch.num.messages": 10_000})
    for row in rows:
        while True:
            try:
                producer.produce(topic, value=json.dumps(row))
                break
            except BufferError:  # the client's queue is full: let it deliver some
                producer.poll(0.1)
    if producer.flush(120) != 0:
        raise RuntimeError(f"messages to {topic} not delivered")


def topic_rows(spark: SparkSession, options: dict[str, str], topic: str, columns: str) -> DataFrame:
    """Spark's own reading of a topic of JSON values: the Kafka source, ``from_json`` into ``columns``."""
    messages = (
        spark.readStream.format("kafka")
        .options(**options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    return messages.select(F.from_json(F.col("value").cast("string"), columns).alias("row")).select("row.*")


def measure(spark: SparkSession, args: argparse.Namespace, root: str, servers: str, progress: Progress) -> dict:
    pilot = make_stream(STEPS, 10, SEED + 1)
    per_order = pilot.logistics_rows() / (10 * STEPS)
    stream = make_stream(STEPS, max(1, round(args.rows / (per_order * STEPS))), SEED + 1)
    orders_rows = [row for step in stream.orders for row in step]
    logistics_rows = [row for step in stream.logistics for row in step]
    topics = {"orders": new_topic(servers, "orders"), "logistics": new_topic(servers, "logistics")}
    sent = time.monotonic()
    send_all(servers, topics["orders"], orders_rows)
    send_all(servers, topics["logistics"], logistics_rows)
    print(
        f"{len(orders_rows):,} orders and {len(logistics_rows):,} logistics rows ({len(stream.shipped_at):,} SHIPPED) "
        f"sent to two topics in {time.monotonic() - sent:.1f} s",
        flush=True,
    )
    connection = spark_options({"bootstrap.servers": servers}, "kafka_default")
    sources = (
        KafkaTopicSource("orders", topics["orders"], ORDERS_COLUMNS),
        KafkaTopicSource("logistics", topics["logistics"], LOGISTICS_COLUMNS),
    )
    sink_folder = os.path.join(root, "joined")
    os.makedirs(sink_folder)
    spark.sql(f"CREATE TABLE joined ({SINK_COLUMNS}) USING parquet LOCATION '{sink_folder}'")
    plan_file = os.path.join(root, "example_2.json")

    def options(label: str) -> PlanOptions:
        return PlanOptions(
            configuration={"table.exec.state.ttl": "0 ms"},
            sources=sources,
            kafka_connections={"kafka_default": connection},
            checkpoints=os.path.join(root, label, "checkpoints"),
        )

    statement = EXAMPLE_2.format(sink="joined", orders="orders", logistics="logistics")
    run_plan_statement(
        spark, read_plan_statement(f"COMPILE PLAN '{plan_file}' FOR {statement}"), options("compile"), Cancellation()
    )

    def plan_side(label: str) -> int:
        before = spark.table("joined").count()
        result = run_plan_statement(
            spark, read_plan_statement(f"EXECUTE PLAN '{plan_file}'"), options(label), Cancellation()
        )
        written = result.execute["queries"][0]["rows_appended"]
        assert spark.table("joined").count() - before == written
        return written

    def builtin_side(label: str) -> int:
        out = os.path.join(root, label, "joined")
        orders = topic_rows(spark, connection, topics["orders"], ORDERS_COLUMNS)
        shipped = topic_rows(spark, connection, topics["logistics"], LOGISTICS_COLUMNS).where(
            "shipment_status = 'SHIPPED'"
        )
        query = (
            orders.join(shipped, "order_id")
            .select("order_id", "gmt_create", "order_line_id", "product_id", "shipment_status", "gmt_modified")
            .writeStream.foreachBatch(lambda batch, _: batch.write.mode("append").parquet(out))
            .option("checkpointLocation", os.path.join(root, label, "checkpoint"))
            .queryName("builtin_join")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return spark.read.parquet(out).count()

    runs = rotated_rounds({"plan": plan_side, "builtin": builtin_side}, args.rounds, progress)
    return {"stream": stream, "input_rows": len(orders_rows) + len(logistics_rows), "runs": runs}


def report(measured: dict[str, Any]) -> bool:
    runs, rows = measured["runs"], measured["input_rows"]
    print(
        f"{rows:,} input rows (the messages of both topics), per second of the query's processing (sum of its "
        f"batches' triggerExecution); medians of {len(runs['plan'])} round(s)"
    )
    median, _, wall = throughput_table(runs, rows)
    ratio = median["plan"] / median["builtin"]
    print(
        f"  plan / built-in: {ratio:.3f} of the rows/s ({wall['builtin'] / wall['plan']:.3f} over wall time): "
        f"{'MEETS' if ratio >= TARGET_RATIO else 'MISSES'} the target of at least {TARGET_RATIO:.3f}"
    )
    joined = {run["joined_rows"] for side_runs in runs.values() for run in side_runs}
    read = {run["input_rows"] for side_runs in runs.values() for run in side_runs}
    expected = len(measured["stream"].shipped_at)
    same = joined == {expected} and read == {rows}
    print(
        f"{'PASS' if same else 'FAIL'}  every side read every message ({', '.join(f'{n:,}' for n in sorted(read))}) "
        f"and wrote the same rows in every round: {', '.join(f'{n:,}' for n in sorted(joined))} (one per SHIPPED "
        f"line: {expected:,})"
    )
    return same


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_kafka_plan_", dir="/tmp")
    started = time.monotonic()
    with working_in(root, args.keep), kafka_broker(root) as servers:
        notes = [machine_note("before", APP_NAME)]
        spark = start_spark(root, APP_NAME, **{"spark.jars": ",".join(KAFKA_CONNECTOR_JARS)})
        progress = Progress()
        spark.streams.addListener(progress)
        try:
            measured = measure(spark, args, root, servers, progress)
            notes.append(machine_note("after", APP_NAME))
        finally:
            spark.stop()
        print()
        print("=" * 132)
        print(
            f"FLIP-292 Example 2 from Kafka topics, {datetime.now(UTC):%Y-%m-%d}: orders JOIN SHIPPED logistics, no "
            "TTL, one local[2] application, one Kafka broker on loopback"
        )
        print("=" * 132)
        same = report(measured)
        print()
        for note in notes:
            print(note)
        print(f"total {time.monotonic() - started:.0f} s")
        print("=" * 132)
        print(f"reproduce: {command}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
