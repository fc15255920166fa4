"""FLIP-292's Example 1 as a compiled plan against Spark's own operators: a keep-first deduplication feeding an
aggregation, and which node costs what.

A seeded stream of ``--rows`` orders ``(order_id, shop, amount)``, each order id drawn from ``--orders`` ids (so
that about a third of the rows repeat an order), over 50 shops, in five JSON files, read available-now in one
batch. Eight sides, in one local[2] SparkSession in this process (in-memory catalog, RocksDB state store, the plan
runner's state partitions), each from an empty checkpoint:

- ``plan``: Example 1 compiled with ``table.exec.state.ttl = 0 ms``: ``ROW_NUMBER() ... = 1`` by order id (a
  keep-first deduplication without TTL: implementation ``spark-drop-duplicates``), then ``COUNT(*)``,
  ``SUM(amount)`` per shop (a local aggregation with Arrow, then transform-with-state), upserted into PostgreSQL;
- ``plan_ttl``: the same compiled with a TTL of 1 d, which no row outlives here (the same result): its
  deduplication runs on transform-with-state, as FLIP-292's keep-first result with a TTL needs (compiled-plans.md);
- ``builtin``: ``dropDuplicates(["order_id"])``, then ``groupBy("shop")`` with the same aggregates, Spark's own
  operators without TTL, in update mode, upserted into PostgreSQL by foreachBatch;
- ``plan_dedup``, ``plan_dedup_ttl`` and ``builtin_dedup``: the deduplication alone, into a parquet table (the
  plan's catalog sink, a foreachBatch append for Spark's);
- ``plan_aggregate`` and ``builtin_aggregate``: the aggregation alone, over every row, into PostgreSQL.

The sides rotate over ``--rounds`` rounds after an unmeasured warm-up of each. Reported: input rows per second of
the query's processing (the sum of its batches' ``triggerExecution``), medians, and each plan side's ratio to its
built-in twin. Checked: the whole sides write the same counts and sums per shop, the deduplications the same
rows.

PostgreSQL: database spark_tables_test on 127.0.0.1:5432 (user postgres, trust auth), schema dedup_bench, dropped
at the end.

Usage::

    .venv/bin/python bench/plan_dedup.py [--rows 300000] [--orders 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from harness import local_spark, machine_note, reproduce_command, working_in
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.jobs.streaming.session_confs import SESSION_CONFS, state_partitions
from spark_tables.tasks.sql_reader import read_plan_statement

APP_NAME = "spark_tables-bench-plan-dedup"
SEED = 2921
SHOPS = 50
FILES = 5
PG = {"host": "127.0.0.1", "port": 5432, "dbname": "spark_tables_test", "user": "postgres"}
SCHEMA = "dedup_bench"
FIRST_ROWS = (
    "FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn FROM orders) WHERE rn = 1"
)
COUNTS = "INSERT INTO {sink} SELECT shop, COUNT(*) AS orders, SUM(amount) AS total"
PLANS = {
    "plan": f"{COUNTS} {FIRST_ROWS} GROUP BY shop",
    "plan_ttl": f"{COUNTS} {FIRST_ROWS} GROUP BY shop",
    "plan_dedup": f"INSERT INTO first_orders SELECT order_id, shop, amount {FIRST_ROWS}",
    "plan_dedup_ttl": f"INSERT INTO first_orders SELECT order_id, shop, amount {FIRST_ROWS}",
    "plan_aggregate": f"{COUNTS} FROM orders GROUP BY shop",
}
#: The TTL of the ``_ttl`` sides: longer than the benchmark, so that their results are those without TTL.
LONG_TTL = "1 d"
SIDES = (
    "plan", "plan_ttl", "builtin", "plan_dedup", "plan_dedup_ttl", "builtin_dedup", "plan_aggregate",
    "builtin_aggregate",
)  # fmt: skip
#: Each plan side and the built-in side it is measured against.
RATIOS = (
    ("plan", "builtin"),
    ("plan_ttl", "builtin"),
    ("plan_dedup", "builtin_dedup"),
    ("plan_dedup_ttl", "builtin_dedup"),
    ("plan_aggregate", "builtin_aggregate"),
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000, help="order rows in the stream (default 300,000)")
    parser.add_argument("--orders", type=int, default=200_000, help="distinct order ids drawn from (200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every side (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if min(args.rows, args.orders, args.rounds) < 1:
        parser.error("--rows, --orders and --rounds must be at least 1")
    return args


def connect() -> psycopg.Connection:
    return psycopg.connect(**PG, autocommit=True)


def upsert(table: str) -> Any:
    """foreachBatch's function of Spark's own side: the batch's rows upserted by shop."""

    def write(batch: DataFrame, _: int) -> None:
        rows = [tuple(row) for row in batch.collect()]
        with connect() as connection, connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO {SCHEMA}.{table} VALUES (%s, %s, %s) ON CONFLICT (shop) DO UPDATE "
                "SET orders = EXCLUDED.orders, total = EXCLUDED.total",
                rows,
            )

    return write


def measure(spark: SparkSession, args: argparse.Namespace, root: str) -> tuple[dict[str, list[float]], bool]:
    """Every side's seconds of processing per round, and whether the last round's outputs agree."""
    folder = os.path.join(root, "orders")
    seeded = [
        F.pmod(F.xxhash64("id", F.lit(SEED + n)), F.lit(size)) for n, size in enumerate((args.orders, SHOPS, 499))
    ]
    spark.range(args.rows).select(
        seeded[0].cast("int").alias("order_id"),
        F.format_string("shop-%02d", seeded[1]).alias("shop"),
        (seeded[2] + 1).cast("int").alias("amount"),
    ).repartition(FILES).write.json(folder)
    spark.sql(f"CREATE TABLE orders (order_id INT, shop STRING, amount INT) USING json LOCATION '{folder}'")
    distinct = spark.table("orders").select("order_id").distinct().count()
    print(f"{args.rows:,} order rows, {distinct:,} distinct orders, {SHOPS} shops, in {FILES} files", flush=True)
    with connect() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        connection.execute(f"CREATE SCHEMA {SCHEMA}")

    def pg_table(label: str) -> str:
        with connect() as connection:
            connection.execute(f"CREATE TABLE {SCHEMA}.{label} (shop text PRIMARY KEY, orders bigint, total bigint)")
        return label

    def plan_side(side: str, label: str) -> float:
        sink = PostgresUpsertSink(name=label, conn_id="bench", table=f"{SCHEMA}.{pg_table(label)}", key=("shop",))
        if side.startswith("plan_dedup"):
            spark.sql("DROP TABLE IF EXISTS first_orders")
            spark.sql(f"CREATE TABLE first_orders (order_id INT, shop STRING, amount INT) USING parquet "
                      f"LOCATION '{os.path.join(root, label, 'first_orders')}'")  # fmt: skip
        options = PlanOptions(
            configuration={"table.exec.state.ttl": LONG_TTL if side.endswith("_ttl") else "0 ms"},
            postgres_sinks=(sink,),
            connections={sink.name: dict(PG)},
            checkpoints=os.path.join(root, label, "checkpoints"),
        )
        plan_file = os.path.join(root, label, "plan.json")
        statement = f"COMPILE AND EXECUTE PLAN '{plan_file}' FOR {PLANS[side].format(sink=label)}"
        done = run_plan_statement(spark, read_plan_statement(statement), options, Cancellation())
        with open(plan_file) as plan:
            nodes = json.load(plan)["nodes"]
        implementations[side] = [
            f"{node['type']}: {node['implementation']}" for node in nodes if "implementation" in node
        ]
        return done.execute["queries"][0]["processing_ms"] / 1000

    def builtin_side(side: str, label: str) -> float:
        orders = spark.readStream.table("orders")
        if side == "builtin_dedup":
            out = os.path.join(root, label, "first_orders")
            frame = orders.dropDuplicates(["order_id"])
            writer = frame.writeStream.foreachBatch(lambda batch, _: batch.write.mode("append").parquet(out))
        else:
            frame = orders.dropDuplicates(["order_id"]) if side == "builtin" else orders
            frame = frame.groupBy("shop").agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("total"))
            writer = frame.writeStream.outputMode("update").foreachBatch(upsert(pg_table(label)))
        query = (
            writer.option("checkpointLocation", os.path.join(root, label, "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]) / 1000

    seconds: dict[str, list[float]] = {side: [] for side in SIDES}
    implementations: dict[str, list[str]] = {}
    for number in range(args.rounds + 1):  # round 0 is the warm-up
        for side in SIDES[number % len(SIDES) :] + SIDES[: number % len(SIDES)]:
            label = f"{side}_{number}"
            run = plan_side if side.startswith("plan") else builtin_side
            took = run(side, label)
            print(f"  round {number or 'warm-up'}: {side:<18} {took:6.2f} s processing", flush=True)
            if number:
                seconds[side].append(took)
    for side, nodes in implementations.items():
        print(f"  {side}: {', '.join(nodes) or 'no stateful node'}")
    return seconds, agree(spark, root, args.rounds)


def agree(spark: SparkSession, root: str, rounds: int) -> bool:
    """The whole sides' tables and the deduplications' rows agree (the last round's)."""
    with connect() as connection:
        tables = [
            sorted(connection.execute(f"SELECT * FROM {SCHEMA}.{side}_{rounds}").fetchall())
            for side in ("plan", "plan_ttl", "builtin")
        ]
    first = [
        spark.read.parquet(os.path.join(root, f"{side}_{rounds}", "first_orders")).select("order_id")
        for side in ("plan_dedup", "plan_dedup_ttl", "builtin_dedup")
    ]
    same_rows = all(rows.exceptAll(first[-1]).isEmpty() and rows.count() == first[-1].count() for rows in first[:-1])
    verdict = "PASS" if tables[0] == tables[1] == tables[2] and same_rows else "FAIL"
    print(f"{verdict}  the plan and Spark's operators wrote the same counts and sums per shop ({len(tables[0])} shops) "
          f"and the same first rows ({first[0].count():,} orders)")  # fmt: skip
    return verdict == "PASS"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_plan_dedup_", dir="/tmp")
    started = time.monotonic()
    with working_in(root, args.keep):
        notes = [machine_note("before", APP_NAME)]
        spark = local_spark(APP_NAME, root, **{"spark.sql.catalogImplementation": "in-memory"})
        partitions = state_partitions(spark, PlanOptions().state_partitions)
        for name, value in {**SESSION_CONFS, "spark.sql.shuffle.partitions": str(partitions)}.items():
            spark.conf.set(name, value)
        try:
            seconds, agreed = measure(spark, args, root)
        finally:
            spark.stop()
            with connect() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        notes.append(machine_note("after", APP_NAME))
        rate = {side: statistics.median(args.rows / s for s in runs) for side, runs in seconds.items()}
        print("=" * 110)
        print(f"FLIP-292 Example 1 on compiled plans, {datetime.now(UTC):%Y-%m-%d}: dedup keep-first feeding COUNT/SUM "
              f"per shop, {args.rows:,} rows, one local[2] application; medians of {args.rounds} round(s)")  # fmt: skip
        print("=" * 110)
        print(f"{'side':20}{'rows/s':>10}{'processing':>12}   per round (s)")
        for side, runs in seconds.items():
            print(
                f"{side:20}{rate[side]:10,.0f}{statistics.median(runs):10.2f} s   {', '.join(f'{s:.2f}' for s in runs)}"
            )
        for plan, builtin in RATIOS:
            print(f"  {plan} / {builtin}: {rate[plan] / rate[builtin]:.3f} of the rows/s")
        for note in notes:
            print(note)
        print(f"total {time.monotonic() - started:.0f} s")
        print(f"reproduce: {command}")
    return 0 if agreed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
