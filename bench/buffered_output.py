"""What FLIP-365's buffered output saves: the FLIP's page views counted per page into PostgreSQL, buffered against
unbuffered, in one process run.

A seeded stream of ``--events`` page views over ``--pages`` pages (Zipf-distributed, ``--zipf``) arrives as
``--files`` JSON files, one every ``--period`` seconds, written by a thread while the job runs. ``--path``
chooses the job: ``aggregation`` (the default), Spark's own streaming aggregation
(``SELECT page, count(*) AS views FROM STREAM(views) GROUP BY page``, as ``SparkStreamingAggregationOperator``
runs it), or ``plan``, a compiled plan (``INSERT INTO page_counts SELECT page, COUNT(*) AS views FROM views GROUP
BY page``, compiled once). Each side runs for the stream's time plus ``--tail`` seconds (``run_for``), a
micro-batch every ``--period``, from its own checkpoint into its own PostgreSQL table: ``unbuffered``,
``buffered`` (``execution.flush.max-interval`` = ``--interval`` seconds, the FLIP's 2 minutes scaled down; the
durable buffer as by default in front of PostgreSQL: in the driver, logged in the checkpoint), ``state_store``
(the same, ``execution.flush.durable-store = state-store``: a transform-with-state operator after the aggregation)
and ``memory`` (the same, ``execution.flush.memory-buffer-only``, room for twice the pages: a buffer flushes when
it reaches its bound).
``--sides`` picks some; the sides take turns over ``--rounds`` rounds.

A row trigger on each table logs every write PostgreSQL receives, with its time. Reported per side: records
emitted (rows written), write calls (transactions), input throughput (input rows per second of the micro-batches'
processing), the freshness of the final values (from the last file's arrival to the last write), and from the
unbuffered side's log N, the mean number of updates of a page per interval window in which it changed. Targets
(FLIP-365 as the issue sets them): records emitted reduced by a factor of at least 0.9 N, identical final
results (checked against the counts of the stream itself), input throughput within 10 % of unbuffered, for each
buffered side.

PostgreSQL: database spark_tables_test on 127.0.0.1:5432 (user postgres, trust auth), schema buffer_bench, dropped
at the end.

Usage::

    .venv/bin/python bench/buffered_output.py [--path aggregation|plan] [--sides unbuffered,buffered,state_store,memory]
        [--events 120000] [--pages 500] [--files 60] [--period 2] [--interval 10] [--tail 15] [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from harness import local_spark, machine_note, reproduce_command, working_in
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.tasks.sql_reader import read_plan_statement

APP_NAME = "spark_tables-bench-buffered-output"
SEED = 365
PG = {"host": "127.0.0.1", "port": 5432, "dbname": "spark_tables_test", "user": "postgres"}
SCHEMA = "buffer_bench"
PLAN_QUERY = "INSERT INTO page_counts SELECT page, COUNT(*) AS views FROM views GROUP BY page"
AGGREGATION_QUERY = "SELECT page, count(*) AS views FROM STREAM(views) GROUP BY page"
SIDES = ("unbuffered", "buffered", "state_store", "memory")


def stream_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of the stream (``stream``) and of its runs that every FLIP-365 benchmark takes."""
    parser.add_argument("--events", type=int, default=120_000, help="page views in the stream (default 120,000)")
    parser.add_argument("--pages", type=int, default=500, help="distinct pages (default 500)")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent of the pages' popularity (1.1)")
    parser.add_argument("--files", type=int, default=60, help="files the stream arrives in (default 60)")
    parser.add_argument("--interval", type=float, default=10.0, help="execution.flush.max-interval in seconds (10)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both sides (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")


def checked_stream_arguments(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if min(args.events, args.pages, args.files, args.rounds) < 1 or args.interval <= 0:
        parser.error("counts must be at least 1 and times positive")
    return args


def stream_table(spark: Any, database: str, folder: str, files: list[list[str]]) -> None:
    """The stream's files in a new ``folder``, read by table ``<database>.views`` a file a micro-batch."""
    os.makedirs(folder)
    spark.sql(f"DROP TABLE IF EXISTS {database}.views")
    spark.sql(
        f"CREATE TABLE {database}.views (page STRING) USING json OPTIONS (maxFilesPerTrigger 1) LOCATION '{folder}'"
    )
    for number, pages in enumerate(files):  # the file source reads them in the order of their times
        path = os.path.join(folder, f"part-{number:05d}.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps({"page": page}) + "\n" for page in pages)
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", choices=("aggregation", "plan"), default="aggregation", help="the job measured")
    parser.add_argument("--sides", default=",".join(SIDES), help="comma-separated, of: " + ", ".join(SIDES))
    parser.add_argument("--period", type=float, default=2.0, help="seconds between files and between batches (2)")
    parser.add_argument("--tail", type=float, default=15.0, help="seconds each run lasts after the stream (15)")
    stream_arguments(parser)
    args = checked_stream_arguments(parser, argv)
    if args.period <= 0:
        parser.error("counts must be at least 1 and times positive")
    args.sides = [side.strip() for side in args.sides.split(",")]
    if "unbuffered" not in args.sides or not set(args.sides) <= set(SIDES) or len(args.sides) < 2:
        parser.error(f"--sides: unbuffered and at least one of {', '.join(SIDES[1:])} (given {','.join(args.sides)})")
    return args


def stream(args: argparse.Namespace) -> list[list[str]]:
    """The seeded page views, file by file."""
    rng = random.Random(SEED)
    weights = [1 / (rank**args.zipf) for rank in range(1, args.pages + 1)]
    pages = rng.choices([f"page-{rank:05d}" for rank in range(1, args.pages + 1)], weights, k=args.events)
    size = -(-args.events // args.files)
    return [pages[start : start + size] for start in range(0, args.events, size)]


def connect() -> psycopg.Connection:
    return psycopg.connect(host=PG["host"], port=PG["port"], dbname=PG["dbname"], user=PG["user"], autocommit=True)


def create_sink(table: str) -> PostgresUpsertSink:
    """The side's table, and a row trigger logging every write it receives."""
    with connect() as connection:
        connection.execute(f"CREATE TABLE {SCHEMA}.{table} (page text PRIMARY KEY, views bigint)")
        connection.execute(f"CREATE TABLE {SCHEMA}.{table}_log (page text, views bigint, at timestamptz)")
        connection.execute(
            f"CREATE FUNCTION {SCHEMA}.{table}_logged() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"INSERT INTO {SCHEMA}.{table}_log VALUES (NEW.page, NEW.views, clock_timestamp()); RETURN NEW; END $$"
        )
        connection.execute(
            f"CREATE TRIGGER logged AFTER INSERT OR UPDATE ON {SCHEMA}.{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.{table}_logged()"
        )
    return PostgresUpsertSink(name="page_counts", conn_id="bench", table=f"{SCHEMA}.{table}", key=("page",))


def side_run(
    spark: SparkSession,
    args: argparse.Namespace,
    root: str,
    label: str,
    files: list[list[str]],
    side: str,
) -> dict[str, Any]:
    """One run of the side's job for the stream's time, the stream written meanwhile; what it did."""
    folder = os.path.join(root, label, "views")
    os.makedirs(folder)
    spark.sql("DROP TABLE IF EXISTS views")
    spark.sql(f"CREATE TABLE views (page STRING) USING json LOCATION '{folder}'")
    sink = create_sink(label)
    configuration = {
        "buffered": {"execution.flush.max-interval": f"{int(args.interval * 1000)} ms"},
        "state_store": {
            "execution.flush.max-interval": f"{int(args.interval * 1000)} ms",
            "execution.flush.durable-store": "state-store",
        },
        "memory": {
            "execution.flush.max-interval": f"{int(args.interval * 1000)} ms",
            "execution.flush.memory-buffer-only": "true",
            "state.backend.cache.max-entries-num": str(2 * args.pages),
        },
    }.get(side, {})
    streaming = StreamingOptions(
        configuration=configuration,
        connections={sink.name: dict(PG)},
        run_for=f"{int((len(files) * args.period + args.tail) * 1000)} ms",
        trigger_interval=f"{int(args.period * 1000)} ms",
    )
    options = PlanOptions(
        **streaming.to_dict(), postgres_sinks=(sink,), checkpoints=os.path.join(root, label, "checkpoints")
    )
    if args.path == "plan":
        plan_file = os.path.join(root, label, "plan.json")
        run_plan_statement(
            spark, read_plan_statement(f"COMPILE PLAN '{plan_file}' FOR {PLAN_QUERY}"), options, Cancellation()
        )
    arrivals: list[float] = []

    def feed() -> None:
        start = time.time() + args.period
        for number, pages in enumerate(files):
            time.sleep(max(0.0, start + number * args.period - time.time()))
            path = os.path.join(folder, f"part-{number:05d}.json")
            with open(path + ".tmp", "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps({"page": page}) + "\n" for page in pages)
            os.rename(path + ".tmp", path)
            arrivals.append(time.time())

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    if args.path == "plan":
        executed = run_plan_statement(
            spark, read_plan_statement(f"EXECUTE PLAN '{plan_file}'"), options, Cancellation()
        )
        query = executed.execute["queries"][0]
    else:
        job = StreamingAggregationJob(AGGREGATION_QUERY, sink, os.path.join(root, label, "checkpoint"), streaming)
        query = run_streaming_aggregation(spark, job, Cancellation()).query
    feeder.join()
    with connect() as connection:
        final = dict(connection.execute(f"SELECT page, views FROM {sink.table}").fetchall())
        log = connection.execute(f"SELECT page, extract(epoch FROM at) FROM {sink.table}_log ORDER BY at").fetchall()
    return {
        "label": label,
        "emitted": len(log),
        "write_calls": query["write_calls"],
        "input_rows": query.get("buffer", {}).get("records_in", query["input_rows"]),
        "processing_s": query["processing_ms"] / 1000,
        "freshness_s": (float(log[-1][1]) - arrivals[-1]) if log else float("nan"),
        "final": final,
        "log": [(page, float(at)) for page, at in log],
        "flushes": query.get("buffer", {}).get("flushes"),
    }


def updates_per_window(log: list[tuple[str, float]], interval: float) -> float:
    """N: the mean number of writes of a page per interval window in which it was written."""
    per_window = collections.Counter((page, int(at // interval)) for page, at in log)
    return statistics.mean(per_window.values()) if per_window else 0.0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_buffer_", dir="/tmp")
    started = time.monotonic()
    files = stream(args)
    expected = collections.Counter(page for pages in files for page in pages)
    with working_in(root, args.keep):
        notes = [machine_note("before", APP_NAME)]
        spark = local_spark(APP_NAME, root, **{"spark.sql.catalogImplementation": "in-memory"})
        with connect() as connection:
            connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
            connection.execute(f"CREATE SCHEMA {SCHEMA}")
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in args.sides}
        try:
            for number in range(args.rounds):
                order = args.sides[number % len(args.sides) :] + args.sides[: number % len(args.sides)]
                for side in order:
                    run = side_run(spark, args, root, f"{side}_{number}", files, side)
                    runs[side].append(run)
                    print(
                        f"  round {number + 1}: {side:<10} {run['emitted']:7,} written, {run['write_calls']:4} "
                        f"write calls, {run['input_rows'] / run['processing_s']:9,.0f} rows/s, final values "
                        f"{run['freshness_s']:5.2f} s after the last file, flushes {run['flushes']}",
                        flush=True,
                    )
            notes.append(machine_note("after", APP_NAME))
        finally:
            spark.stop()
            with connect() as connection:
                connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        print()
        print("=" * 110)
        print(
            f"FLIP-365 page views, {datetime.now(UTC):%Y-%m-%d}: {args.events:,} views of {args.pages:,} pages in "
            f"{args.files} files {args.period} s apart, max-interval {args.interval} s, one local[2] application, "
            f"{'a compiled plan' if args.path == 'plan' else 'Spark streaming aggregation'}"
        )
        print("=" * 110)

        def median(side: str, key: str) -> float:
            return statistics.median(run[key] for run in runs[side])

        n = statistics.median(updates_per_window(run["log"], args.interval) for run in runs["unbuffered"])
        rates = {
            side: statistics.median(run["input_rows"] / run["processing_s"] for run in runs[side]) for side in runs
        }
        print(f"{'side':12}{'written':>10}{'write calls':>13}{'rows/s':>10}{'freshness':>11}")
        for side in runs:
            print(
                f"{side:12}{median(side, 'emitted'):10,.0f}{median(side, 'write_calls'):13,.0f}{rates[side]:10,.0f}"
                f"{median(side, 'freshness_s'):9.2f} s"
            )
        same = all(run["final"] == dict(expected) for side in runs for run in runs[side])
        checks = [(same, f"every run's final table equals the stream's counts ({len(expected):,} pages)")]
        for side in [side for side in args.sides if side != "unbuffered"]:
            reduction = median("unbuffered", "emitted") / median(side, "emitted")
            throughput = rates[side] / rates["unbuffered"]
            checks += [
                (
                    reduction >= 0.9 * n,
                    f"{side}: records written reduced {reduction:.2f}x; N = {n:.2f}, target 0.9 N = {0.9 * n:.2f}",
                ),
                (
                    throughput >= 0.9,
                    f"{side}: input throughput {side} / unbuffered {throughput:.3f}, target at least 0.9",
                ),
            ]
        for passed, line in checks:
            print(f"{'PASS' if passed else 'FAIL'}  {line}")
        for note in notes:
            print(note)
        print(f"total {time.monotonic() - started:.0f} s")
        print("=" * 110)
        print(f"reproduce: {command}")
    return 0 if all(passed for passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
