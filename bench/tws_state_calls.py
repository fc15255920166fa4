"""What Spark's Python transform-with-state costs a join, per key and per state call: the ceiling of any join
built on it, against Spark's own stream-stream join (FLIP-292's throughput target).

One seeded stream in parquet files: ``--keys`` join keys, each with one left row and 0-3 right rows, read as a
stream, available-now, in one batch, into Spark's ``noop`` sink (nothing written: only the operators are timed).
Every side runs in one local[2] SparkSession in this process (RocksDB state store, two shuffle partitions, the plan
runner's settings) and rotates over ``--rounds`` rounds after an unmeasured warm-up:

- ``builtin``: Spark's stream-stream inner join of the two sides, no watermark (state kept forever).
- ``key_handoff``: the union grouped by the join key, each key's rows handed to Python and read there; no state,
  no output. The floor of every design that groups by the join key, as the plan's join does.
- ``key_one_list``: the same, and per key one list-state read and one append of the key's new rows: the state calls
  of the plan's join (one list for both sides), without the join itself.
- ``key_two_lists``: per key a read and an append of each side's own list: the plan's join before it kept both
  sides in one list.
- ``bucket_handoff``: the union grouped by 64 buckets of the join key's hash, each bucket's rows handed to Python
  and sorted by key there; no state. This removes the per-key hand-over.
- ``bucket_map``: bucketed, and per key a map-state read and update (the key's rows of both sides), and the
  joined rows sent on: an inner join with no TTL, the least a bucketed join does. A real one also needs TTL
  cleanup per entry, which timers per bucket cannot give without scanning the bucket's map.

Reported: input rows per second of processing (the sum of the batches' ``triggerExecution``), medians, and each
side's ratio to ``builtin``. Checked: ``bucket_map`` and ``builtin`` join the same number of rows (counted by one
more, untimed run of each into a memory sink).

Usage::

    .venv/bin/python bench/tws_state_calls.py [--keys 46000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from harness import local_spark, machine_note, reproduce_command, working_in
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle, TimerValues
from pyspark.sql.types import ArrayType, ByteType, LongType, StringType, StructField, StructType

from spark_tables.jobs.streaming.session_confs import SESSION_CONFS

APP_NAME = "spark_tables-bench-tws-state-calls"
SEED = 292
BUCKETS = 64
TARGET_RATIO = 1 / 3
INPUT_COLUMNS = "k LONG, side BYTE, l STRING, r STRING"
OUTPUT = StructType([StructField("k", LongType()), StructField("l", StringType()), StructField("r", StringType())])
OUTPUT_ROW = Row("k", "l", "r")
KEY = StructType([StructField("k", LongType())])
ENTRY = StructType(
    [
        StructField("side", ByteType()),
        StructField("l", StringType()),
        StructField("r", StringType()),
        StructField("written_ms", LongType()),
    ]
)
SIDES_VALUE = StructType([StructField("left", ArrayType(StringType())), StructField("right", ArrayType(StringType()))])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=46_000, help="join keys of the stream (default 46,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every side (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if min(args.keys, args.rounds) < 1:
        parser.error("--keys and --rounds must be at least 1")
    return args


# The processors run in Spark's Python workers; this script runs as ``__main__``, so they go pickled by value.


class KeyHandoff(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        collections.deque(rows, maxlen=0)
        return iter(())


class KeyOneList(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.rows = handle.getListState("rows", ENTRY)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        collections.deque(self.rows.get(), maxlen=0)
        self.rows.appendList([(row.side, row.l, row.r, 0) for row in rows])
        return iter(())


class KeyTwoLists(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.sides = (handle.getListState("left_rows", ENTRY), handle.getListState("right_rows", ENTRY))

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        new: tuple[list[tuple], list[tuple]] = ([], [])
        for row in rows:
            new[row.side].append((row.side, row.l, row.r, 0))
        for state in self.sides:
            collections.deque(state.get(), maxlen=0)
        for state, added in zip(self.sides, new, strict=True):
            if added:
                state.appendList(added)
        return iter(())


class BucketHandoff(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        by_key: dict[int, list[Row]] = collections.defaultdict(list)
        for row in rows:
            by_key[row.k].append(row)
        return iter(())


class BucketMap(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        self.sides = handle.getMapState("sides", KEY, SIDES_VALUE)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: TimerValues) -> Iterator[Row]:
        by_key: dict[int, list[Row]] = collections.defaultdict(list)
        for row in rows:
            by_key[row.k].append(row)
        output = []
        for k, key_rows in by_key.items():
            stored = self.sides.getValue((k,))
            left, right = (list(stored[0]), list(stored[1])) if stored else ([], [])
            for row in key_rows:
                if row.side == 1:
                    right.append(row.r)
                    output.extend(OUTPUT_ROW(k, other, row.r) for other in left)
            for row in key_rows:
                if row.side == 0:
                    left.append(row.l)
                    output.extend(OUTPUT_ROW(k, row.l, other) for other in right)
            self.sides.updateValue((k,), (left, right))
        return iter(output)


def start_spark(root: str) -> SparkSession:
    spark = local_spark(APP_NAME, root)
    for name, value in {**SESSION_CONFS, "spark.sql.shuffle.partitions": "2"}.items():
        spark.conf.set(name, value)
    return spark


def write_stream(spark: SparkSession, folder: str, keys: int) -> tuple[int, int]:
    """The seeded stream's rows into parquet files; returns its rows and the rows an inner join gives."""
    rng = random.Random(SEED)
    rows, joined = [], 0
    for k in range(keys):
        rows.append((k, 0, f"left-{k}", None))
        lines = rng.randint(0, 3)
        rows.extend((k, 1, None, f"right-{k}-{line}") for line in range(lines))
        joined += lines
    rng.shuffle(rows)
    spark.createDataFrame(rows, INPUT_COLUMNS).repartition(5).write.parquet(folder)
    return len(rows), joined


def run(name: str, frame: DataFrame, checkpoint: str) -> float:
    """The query into the noop sink, available-now; returns its processing seconds."""
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    batches = [progress for progress in query.recentProgress if progress["numInputRows"] > 0]
    return sum(progress["durationMs"]["triggerExecution"] for progress in batches) / 1000


def sides(spark: SparkSession, folder: str) -> dict[str, Callable[[], DataFrame]]:
    def source() -> DataFrame:
        return spark.readStream.schema(INPUT_COLUMNS).parquet(folder)

    def by_key(processor: StatefulProcessor) -> Callable[[], DataFrame]:
        return lambda: source().groupBy("k").transformWithState(processor, OUTPUT, "Append", "ProcessingTime")

    def by_bucket(processor: StatefulProcessor) -> Callable[[], DataFrame]:
        return lambda: (
            source()
            .withColumn("bucket", F.pmod(F.hash("k"), F.lit(BUCKETS)))
            .groupBy("bucket")
            .transformWithState(processor, OUTPUT, "Append", "ProcessingTime")
        )

    def builtin() -> DataFrame:
        left = source().where("side = 0").select("k", "l")
        right = source().where("side = 1").select("k", "r")
        return left.join(right, "k")

    return {
        "builtin": builtin,
        "key_handoff": by_key(KeyHandoff()),
        "key_one_list": by_key(KeyOneList()),
        "key_two_lists": by_key(KeyTwoLists()),
        "bucket_handoff": by_bucket(BucketHandoff()),
        "bucket_map": by_bucket(BucketMap()),
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_tws_", dir="/tmp")
    print(f"working folder: {root}", flush=True)
    started = time.monotonic()
    with working_in(root, args.keep):
        notes = [machine_note("before", APP_NAME)]
        spark = start_spark(root)
        try:
            folder = os.path.join(root, "stream")
            input_rows, joined_rows = write_stream(spark, folder, args.keys)
            print(f"{args.keys:,} keys, {input_rows:,} rows, {joined_rows:,} joined rows", flush=True)
            frames = sides(spark, folder)
            seconds: dict[str, list[float]] = {side: [] for side in frames}
            names = list(frames)
            for number in range(args.rounds + 1):  # round 0 is the warm-up
                for side in names[number % len(names) :] + names[: number % len(names)]:
                    checkpoint = os.path.join(root, "checkpoints", f"{side}-{number}")
                    taken = run(side, frames[side](), checkpoint)
                    print(f"  round {number or 'warm-up'}: {side:<15}{taken:7.2f} s", flush=True)
                    if number:
                        seconds[side].append(taken)
            notes.append(machine_note("after", APP_NAME))
            joined = {side: count_output(spark, frames[side]()) for side in ("builtin", "bucket_map")}
        finally:
            spark.stop()
        print()
        print("=" * 100)
        print(
            f"Python transform-with-state against Spark's join, {datetime.now(UTC):%Y-%m-%d}: {args.keys:,} keys, "
            f"{input_rows:,} rows, one local[2] application; medians of {args.rounds} round(s)"
        )
        print("=" * 100)
        builtin = statistics.median(seconds["builtin"])
        print(f"{'side':16}{'rows/s':>10}{'seconds':>10}{'per round':>28}{'of builtin':>12}{'per key':>10}")
        for side, values in seconds.items():
            median = statistics.median(values)
            per_round = ", ".join(f"{value:.2f}" for value in values)
            print(
                f"{side:16}{input_rows / median:10,.0f}{median:8.2f} s{per_round:>28}{builtin / median:12.3f}"
                f"{1e6 * median / args.keys:8.0f} µs"
            )
        handoff = statistics.median(seconds["key_handoff"])
        print(
            f"  a join grouped by its key can reach at most {builtin / handoff:.3f} of the built-in join (its rows' "
            f"hand-over alone); the target is {TARGET_RATIO:.3f}"
        )
        for side in ("key_one_list", "key_two_lists", "bucket_map"):
            calls = 2 if side != "key_two_lists" else 4
            base = "bucket_handoff" if side == "bucket_map" else "key_handoff"
            extra = statistics.median(seconds[side]) - statistics.median(seconds[base])
            print(f"  {side}: {1e6 * extra / args.keys / calls:.0f} µs a state call ({calls} a key, over {base})")
        same = joined["builtin"] == joined["bucket_map"] == joined_rows
        print(
            f"{'PASS' if same else 'FAIL'}  builtin and bucket_map joined {joined['builtin']:,} and "
            f"{joined['bucket_map']:,} rows ({joined_rows:,} expected)"
        )
        for note in notes:
            print(note)
        print(f"total {time.monotonic() - started:.0f} s")
        print("=" * 100)
        print(f"reproduce: {command}")
    return 0 if same else 1


def count_output(spark: SparkSession, frame: DataFrame) -> int:
    """The rows ``frame`` gives, counted by running it again into a memory sink (not timed)."""
    name = f"count_{time.monotonic_ns()}"
    with tempfile.TemporaryDirectory(dir="/tmp") as checkpoint:
        query = (
            frame.writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        count = spark.table(name).count()
    spark.sql(f"DROP VIEW IF EXISTS {name}")
    return count


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
