"""Overhead of the provider's ``ctas`` job (FLIP-218's lifecycle) over Spark's own ``CREATE TABLE ... AS SELECT``.

All sides write one query's rows to a new parquet table in one local SparkSession (local[2], in-memory catalog,
warehouse in a temp folder): ``native`` is ``CREATE TABLE db.native_<n> USING parquet AS <query>``;
``ctas_table`` is ``run_job`` of a ``CtasJob`` with atomicity ``table`` (analyse the query, create the table with
its ownership marks, fill it, ``ANALYZE TABLE``, mark it complete); ``ctas_staging`` is the same with atomicity
``staging`` (fill a staging table, mark it complete, rename it). After one unmeasured warm-up run of each side,
each round runs every side once, the order rotated round by round. A time is ``time.perf_counter`` around the
whole call; the row-count check and the DROP TABLE are outside it. The ctas phases are timed by wrapping the
job's steps (a step inside another counts in the outer one; ``other`` is the remainder). The default 30M rows
make one native CTAS take about 13 s on an idle 2-core machine (about 2x longer when other work shares it).

Usage::

    .venv/bin/python bench/ctas_overhead.py [--rounds 3] [--rows 30000000]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.ctas import lifecycle as ctas
from spark_tables.jobs.entry import run_job
from spark_tables.jobs.table_format import catalog as catalog_tables
from spark_tables.jobs.table_format import file_tables

SIDES = ("native", "ctas_table", "ctas_staging")
#: (module, function, phase) for every step of the ctas job that is timed on its own.
STEPS = (
    (ctas, "undo_unfinished", "checks"),
    (catalog_tables, "properties", "checks"),
    (ctas, "rows", "analyse"),
    (file_tables, "_create", "create"),
    (file_tables, "_fill", "fill"),
    (file_tables, "analyze", "analyze"),
    (catalog_tables, "set_properties", "mark"),
    (file_tables, "_publish", "publish"),
    (file_tables.FileTables, "written", "describe"),
)
PHASES = [*dict.fromkeys(phase for _, _, phase in STEPS), "other"]


class PhaseClock:
    """Seconds per phase of the current run; a step called inside another timed step counts in the outer one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._depth = 0

    def wrap(self, module: Any, name: str, phase: str) -> None:
        inner: Callable[..., Any] = getattr(module, name)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._depth += 1
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self._depth -= 1
                if not self._depth:
                    self.seconds[phase] += time.perf_counter() - started

        setattr(module, name, timed)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds of all three sides (default 3)")
    parser.add_argument("--rows", type=int, default=30_000_000, help="rows of the query (default 30,000,000)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < 1:
        parser.error("--rounds and --rows must be at least 1")
    return args


def run_side(spark: SparkSession, side: str, number: int, query: str, clock: PhaseClock) -> tuple[str, float]:
    """Run one side once; return its table and its seconds (the phases land in ``clock``)."""
    table = f"db.{side.removeprefix('ctas_')}_{number}"
    clock.seconds.clear()
    if side == "native":
        started = time.perf_counter()
        spark.sql(f"CREATE TABLE {table} USING parquet AS {query}")
        return table, time.perf_counter() - started
    owner = TableOwner(dag_id="bench_ctas_overhead", run_id=f"round_{number}", task_id=side)
    job = CtasJob(table=table, query=query, owner=owner, atomicity=side.removeprefix("ctas_"))
    started = time.perf_counter()
    result = run_job(spark, job, Cancellation())
    seconds = time.perf_counter() - started
    if not result.succeeded or result.output is None or result.output.rows is None:
        raise SystemExit(f"{side} round {number} failed: {result.error or result.output}")
    return table, seconds


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    query = f"SELECT id, sha2(CAST(id AS STRING), 256) AS h, id % 100 AS k FROM range(0, {args.rows}, 1, 2)"
    warehouse = tempfile.mkdtemp(prefix="spark_tables_ctas_bench_", dir="/tmp")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("spark_tables-ctas-overhead")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "WARN")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    clock = PhaseClock()
    for module, name, phase in STEPS:
        clock.wrap(module, name, phase)
    times: dict[str, list[float]] = {side: [] for side in SIDES}
    phases: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES[1:]}
    load_before = os.getloadavg()[0]
    try:
        spark.sql("CREATE DATABASE db")
        for number in range(args.rounds + 1):  # round 0 is the warm-up
            for side in SIDES[number % 3 :] + SIDES[: number % 3]:
                table, seconds = run_side(spark, side, number, query, clock)
                counted = spark.table(table).count()
                if counted != args.rows:
                    raise SystemExit(f"{side} round {number}: {table} has {counted} rows, expected {args.rows}")
                spark.sql(f"DROP TABLE {table}")
                print(f"round {number or 'warm-up'}: {side:<13}{seconds:8.2f} s", flush=True)
                if number:
                    times[side].append(seconds)
                    if side != "native":
                        phases[side].append({**clock.seconds, "other": seconds - sum(clock.seconds.values())})
    finally:
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)

    median = {side: statistics.median(values) for side, values in times.items()}
    print("\n" + "=" * 78)
    print(f"ctas job vs native CTAS: {args.rounds} rounds, range({args.rows:,}), local[2], in-memory catalog")
    print("=" * 78)
    print(f"{'side':<14}{'median s':>9}{'/native':>8}{'-native':>9}  per round (s); -native: difference of medians, s")
    for side in SIDES:
        ratio, difference = median[side] / median["native"], median[side] - median["native"]
        rounds = "  ".join(f"{s:.2f}" for s in times[side])
        print(f"{side:<14}{median[side]:9.2f}{ratio:8.3f}{difference:+9.2f}  {rounds}")
    print("\nctas phases, medians in seconds (fill is the write native CTAS does; the rest is the overhead)")
    print(f"{'side':<14}" + "".join(f"{phase:>9}" for phase in PHASES))
    for side, runs in phases.items():
        print(f"{side:<14}" + "".join(f"{statistics.median(r.get(p, 0.0) for r in runs):9.2f}" for p in PHASES))
    print("\nthe difference is: analysing the query (analyse), CREATE TABLE with the marks (create), ANALYZE TABLE")
    print("(analyze), the property updates (mark; inside publish for staging), the rename (publish, staging only),")
    print("catalog look-ups (checks, describe), and insertInto (fill) against Spark's own CTAS write.")
    print(f"load average before {load_before:.2f}, after {os.getloadavg()[0]:.2f} (2 cores: above ~2, other work)")
    print("=" * 78)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
