"""What FLIP-365's buffered output saves into upsert-kafka: the FLIP's page views counted per page into a compacted
Kafka topic kept by key (``KafkaUpsertSink``: a message a changed key a write), buffered against unbuffered, in one
process run, on a real broker.

The stream is ``buffered_output.py``'s: a seeded stream of ``--events`` page views over ``--pages`` pages
(Zipf-distributed) in ``--files`` JSON files; the job is Spark's own streaming aggregation (``SELECT page, count(*)
AS views FROM STREAM(views) GROUP BY page``, as ``SparkStreamingAggregationOperator`` runs it), available-now, a
micro-batch a file, from its own checkpoint into its own compacted topic: ``unbuffered``, and ``buffered``
(``execution.flush.max-interval`` = ``--interval`` seconds of the micro-batches' processing time; the buffer in the
state store, as in front of every Kafka sink). The sides take turns over ``--rounds`` rounds.

Reported per side, from the sink's counts: write calls (a flush, or a micro-batch that changed something), messages
sent, micro-batches; the flush ratio N (micro-batches a write); the run's wall time and input throughput (views a
second of the job's run). Checked: the latest message of every key of each side's topic equals the stream's count.

A broker: ``SPARK_TABLES_TEST_KAFKA`` (host:port) if set, else one started for the run from the jars
``scripts/setup.sh`` fetched (``scripts/kafka_broker.py``) and stopped at its end.

Usage::

    .venv/bin/python bench/kafka_buffered_output.py [--events 120000] [--pages 500] [--files 60] [--interval 10]
        [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from buffered_output import AGGREGATION_QUERY, checked_stream_arguments, stream, stream_arguments, stream_table
from confluent_kafka import Consumer, TopicPartition
from harness import kafka_broker, local_spark, machine_note, new_topic, reproduce_command, working_in
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS
from spark_tables.core.kafka import spark_options
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import KafkaUpsertSink
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation

APP_NAME = "spark_tables-bench-kafka-buffered-output"
DATABASE = "kafka_buffer_bench"
SIDES = ("unbuffered", "buffered")
#: Seconds the broker has to hand its messages back.
TIMEOUT_SECONDS = 30


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stream_arguments(parser)
    return checked_stream_arguments(parser, argv)


def latest_by_key(servers: str, topic: str) -> dict[str, int]:
    """Each page's views in the topic's latest message of its key."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        partition = TopicPartition(topic, 0, 0)
        _, end = consumer.get_watermark_offsets(partition, timeout=TIMEOUT_SECONDS)
        consumer.assign([partition])
        latest: dict[str, int] = {}
        read = 0
        while read < end:
            message = consumer.poll(TIMEOUT_SECONDS)
            if message is None:
                raise RuntimeError(f"topic {topic}: {read} of {end} messages read back in {TIMEOUT_SECONDS} s")
            if message.error():
                raise RuntimeError(f"topic {topic}: {message.error()}")
            read += 1
            row = json.loads(message.value())
            latest[row["page"]] = row["views"]
        return latest
    finally:
        consumer.close()


def side_run(
    spark: SparkSession,
    args: argparse.Namespace,
    root: str,
    label: str,
    files: list[list[str]],
    side: str,
    servers: str,
) -> dict[str, Any]:
    """One side's run from a new source folder, checkpoint and compacted topic."""
    stream_table(spark, DATABASE, os.path.join(root, label, "views"), files)
    topic = new_topic(servers, label, compacted=True)
    configuration = {"execution.flush.max-interval": f"{int(args.interval * 1000)} ms"} if side == "buffered" else {}
    options = StreamingOptions(
        configuration=configuration,
        kafka_connections={"kafka_default": spark_options({"bootstrap.servers": servers}, "kafka_default")},
    )
    sink = KafkaUpsertSink(name="page_counts", topic=topic, key=("page",))
    job = StreamingAggregationJob(AGGREGATION_QUERY, sink, os.path.join(root, label, "checkpoint"), options)
    started = time.monotonic()
    query = run_streaming_aggregation(spark, job, Cancellation()).query
    wall_s = time.monotonic() - started
    return {
        "batches": query["batches"],
        "write_calls": query["write_calls"],
        "messages": query["messages_sent"],
        "wall_s": wall_s,
        "views_per_s": args.events / wall_s,
        "final": latest_by_key(servers, topic),
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_kafka_buffer_", dir="/tmp")
    started = time.monotonic()
    files = stream(args)
    expected = collections.Counter(page for pages in files for page in pages)
    with working_in(root, args.keep), kafka_broker(root) as servers:
        notes = [machine_note("before", APP_NAME)]
        jars = ",".join(KAFKA_CONNECTOR_JARS)
        spark = local_spark(APP_NAME, root, **{"spark.sql.catalogImplementation": "in-memory", "spark.jars": jars})
        spark.sql(f"CREATE DATABASE {DATABASE}")
        spark.sql(f"USE {DATABASE}")  # the query reads STREAM(views)
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        try:
            for number in range(args.rounds):
                for side in SIDES[number % 2 :] + SIDES[: number % 2]:
                    run = side_run(spark, args, root, f"{side}_{number}", files, side, servers)
                    runs[side].append(run)
                    print(
                        f"  round {number + 1}: {side:<10} {run['batches']:4} batches, {run['write_calls']:4} writes, "
                        f"{run['messages']:7,} messages, {run['wall_s']:6.1f} s, {run['views_per_s']:8,.0f} views/s",
                        flush=True,
                    )
            notes.append(machine_note("after", APP_NAME))
        finally:
            spark.stop()
        print()
        print("=" * 110)
        print(
            f"FLIP-365 into upsert-kafka, {datetime.now(UTC):%Y-%m-%d}: {args.events:,} views of {args.pages:,} pages "
            f"in {args.files} files, a micro-batch a file, max-interval {args.interval} s, one local[2] application, "
            f"Spark streaming aggregation available-now, one Kafka broker on loopback, {args.rounds} round(s)"
        )
        print("=" * 110)

        def median(side: str, key: str) -> float:
            return statistics.median(run[key] for run in runs[side])

        print(f"{'side':12}{'batches':>9}{'writes':>8}{'N':>7}{'messages':>10}{'wall':>9}{'views/s':>10}")
        for side in SIDES:
            ratio = median(side, "batches") / median(side, "write_calls")
            print(
                f"{side:12}{median(side, 'batches'):9,.0f}{median(side, 'write_calls'):8,.0f}{ratio:7.1f}"
                f"{median(side, 'messages'):10,.0f}{median(side, 'wall_s'):7.1f} s{median(side, 'views_per_s'):10,.0f}"
            )
        flush_ratio = median("buffered", "batches") / median("buffered", "write_calls")
        fewer = median("unbuffered", "messages") / median("buffered", "messages")
        throughput = median("buffered", "views_per_s") / median("unbuffered", "views_per_s")
        print(f"flush ratio N (micro-batches a buffered write): {flush_ratio:.1f}")
        print(f"unbuffered / buffered messages: {fewer:.2f} (target at least 0.9 N = {0.9 * flush_ratio:.1f})")
        print(f"buffered / unbuffered input throughput: {throughput:.2f} (target at least 0.9)")
        same = all(run["final"] == dict(expected) for side in SIDES for run in runs[side])
        print(
            f"{'PASS' if same else 'FAIL'}  every topic's latest message of each key equals the stream's count "
            f"({len(expected):,} pages)"
        )
        for note in notes:
            print(note)
        print(f"total {time.monotonic() - started:.0f} s")
        print("=" * 110)
        print(f"reproduce: {command}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
