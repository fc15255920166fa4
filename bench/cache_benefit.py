"""What a cached table saves: FLIP-36's program with b cached, against the same program recomputing b.

Two measurements, each with both sides in this one process run (through Airflow first, then in one application).

In one application (``--rounds``, a local[2] SparkSession in this process, the three sides rotating round by
round): recomputing b for a consumer query, against the provider's own job code making b ready from a miss
(computing it, writing and describing the copy) and from a hit (checking the copy, reading it) for the same query.
This is what the mechanism itself costs, with no spark-submit around it.

Through Airflow (``--dag-rounds``): one DAG, run by ``dag.test()`` through real spark-submit on the embedded
default, holds both sides on the same table a (``--rows`` rows, made by the first task, which also warms the
machine up and writes the drivers' class-data archive), their tasks interleaved:

- cached: ``max_b``, ``min_b``, ``normalise_b``, ``count_b`` read b as a cached table: the first computes it and
  writes the copy, the others read the copy;
- recomputed: the same four tasks, where b is a plain temporary view that every task computes again.

b is the expensive step: a SHA-256 per row of a, aggregated to ``--keys`` keys. Every consumer reads the
expensive column, so Spark cannot prune it away. Both sides must return the same rows.

Reported: per consumer, the Spark work inside its application (the job's ``work_seconds``, from session start
to result: it excludes the JVM and session start of each spark-submit) and the whole task time; each side's
total; what writing the copy adds to the first cached task. The targets: the cached consumers' Spark work at
least 20x faster than recomputing b, and the copy adding at most 10 % to computing b.

Usage::

    .venv/bin/python bench/cache_benefit.py [--rows 30000000] [--keys 200000] [--rounds 3] [--dag-rounds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from harness import fresh_airflow, reproduce_command, run_dag, working_in, write_dag_file

DAG_ID = "spark_tables_cache_benefit"
CONSUMERS = {
    "max_b": "SELECT max(total) AS max_total, max(h) AS max_h FROM b",
    "min_b": "SELECT min(total) AS min_total, min(h) AS min_h FROM b",
    "normalise_b": """SELECT sum((total - m.lo) / (m.hi - m.lo)) AS normalised, max(h) AS h
                      FROM b CROSS JOIN (SELECT min(total) AS lo, max(total) AS hi FROM b) m""",
    "count_b": "SELECT count(*) AS keys, count(h) AS hashed FROM b",
}
B_QUERY = "SELECT k, count(*) AS n, sum(v) AS total, max(sha2(CAST(id * v AS STRING), 256)) AS h FROM a GROUP BY k"
TARGET_SPEEDUP = 20.0
TARGET_WRITE_FRACTION = 0.10


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30_000_000, help="rows of table a (default 30,000,000)")
    parser.add_argument("--keys", type=int, default=200_000, help="keys b aggregates a to (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds inside one application (default 3)")
    parser.add_argument("--dag-rounds", type=int, default=1, help="DAG runs through Airflow (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rows < 1 or not 1 <= args.keys <= args.rows:
        parser.error("need 1 <= --keys <= --rows")
    if args.rounds < 1 or args.dag_rounds < 1:
        parser.error("--rounds and --dag-rounds must be at least 1")
    return args


def in_one_application(args: argparse.Namespace, root: str) -> None:
    """Recompute against miss and hit, with the provider's job code, in one local[2] application."""
    from pyspark.sql import SparkSession

    from spark_tables.core.cache.descriptor import descriptor_of_copy
    from spark_tables.core.cache.table import CachedTable
    from spark_tables.core.ctas.ownership import TableOwner
    from spark_tables.core.job_spec import CacheUse
    from spark_tables.jobs.cache.views import prepare_cached_views
    from spark_tables.jobs.cancellation import Cancellation

    spark = SparkSession.builder.master("local[2]").config("spark.log.level", "WARN").getOrCreate()
    b, consumer = CachedTable("b", query=B_QUERY), CONSUMERS["max_b"]
    spark.range(args.rows).selectExpr("id", f"id % {args.keys} AS k", "CAST(id % 997 AS DOUBLE) AS v").write.parquet(
        f"{root}/a"
    )
    spark.read.parquet(f"{root}/a").createOrReplaceTempView("a")
    owner = TableOwner(dag_id=DAG_ID, run_id="in_one_application", task_id="bench")
    copy: list[Any] = []

    def recompute(number: int) -> None:
        spark.sql(B_QUERY).createOrReplaceTempView("b")

    def miss(number: int) -> None:
        reports: dict[str, Any] = {}
        prepare_cached_views(spark, (CacheUse(b, (), f"{root}/copy_{number}"),), Cancellation(), reports)
        copy[:] = [descriptor_of_copy("b", b.fingerprint, reports["b"], owner, str(number))]

    def hit(number: int) -> None:
        reports: dict[str, Any] = {}
        prepare_cached_views(spark, (CacheUse(b, tuple(copy), f"{root}/unused"),), Cancellation(), reports)
        if reports["b"]["status"] != "hit":
            raise SystemExit(f"in one application: expected a hit, got {reports['b']}")

    sides = {"recompute": recompute, "miss": miss, "hit": hit}
    miss(0)  # warm-up, and the first copy for a hit
    orders = [list(sides)[number % 3 :] + list(sides)[: number % 3] for number in range(1, args.rounds + 1)]
    seconds = timed_rounds(spark, consumer, sides, orders)
    spark.stop()

    median = {side: statistics.median(values) for side, values in seconds.items()}
    speedup, added = median["recompute"] / median["hit"], median["miss"] / median["recompute"] - 1
    print()
    print("=" * 86)
    print(f"in one local[2] application: b from a = {args.rows:,} rows, {args.keys:,} keys; consumer max_b")
    print("=" * 86)
    for side, values in seconds.items():
        print(f"{side:>10}: median {median[side]:6.2f} s   rounds {', '.join(f'{v:.2f}' for v in values)}")
    verdict = "MEETS" if speedup >= TARGET_SPEEDUP else "MISSES"
    print(f"hit: {speedup:.1f}x faster than recomputing b ({verdict} the 20x target)")
    print(
        f"miss: writing and describing the copy adds {100 * added:+.1f} % to computing b "
        f"({'MEETS' if added <= TARGET_WRITE_FRACTION else 'MISSES'} the 10 % target)"
    )


def timed_rounds(
    spark: Any, consumer: str, sides: dict[str, Callable[[int], None]], orders: list[list[str]]
) -> dict[str, list[float]]:
    """Round ``n`` (from 1) runs the sides in ``orders[n - 1]``, each timed with ``consumer``'s query after it; the
    sides must all answer the query alike."""
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    answers: set[str] = set()
    for number, order in enumerate(orders, start=1):
        for side in order:
            started = time.monotonic()
            sides[side](number)
            answers.add(str(spark.sql(consumer).collect()))
            seconds[side].append(time.monotonic() - started)
    if len(answers) != 1:
        raise SystemExit(f"the sides answered differently: {answers}")
    return seconds


def build_dag(args: argparse.Namespace) -> Any:
    from airflow.sdk import DAG, chain

    from spark_tables.core.cache.table import CachedTable
    from spark_tables.operators.cache import release_caches
    from spark_tables.operators.ctas import SparkCtasOperator
    from spark_tables.operators.sql import SparkSqlJobOperator

    b = CachedTable("b", query=B_QUERY)
    with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        make_a = SparkCtasOperator(
            task_id="make_a",
            sql=f"""CREATE TABLE IF NOT EXISTS a AS SELECT id, id % {args.keys} AS k, CAST(id % 997 AS DOUBLE) AS v
                    FROM range({args.rows})""",
        )
        cached = [SparkSqlJobOperator(task_id=f"cached_{t}", sql=sql, caches=[b]) for t, sql in CONSUMERS.items()]
        recomputed = [
            SparkSqlJobOperator(task_id=f"recomputed_{t}", sql=[f"CREATE TEMPORARY VIEW b AS {b.query}", sql])
            for t, sql in CONSUMERS.items()
        ]
        # The sides interleave, each going first in turn, so neither gets the machine fresher after make_a.
        pairs = enumerate(zip(cached, recomputed, strict=True))
        chain(make_a, *[task for number, (c, r) in pairs for task in ((r, c) if number % 2 == 0 else (c, r))])
        release_caches()
    return dag


def benchmark_dag(argv: list[str]) -> Any:
    """The DAG of this benchmark, for its DAG file (``harness.write_dag_file``)."""
    return build_dag(parse_args(argv))


def collect(dag_run: Any) -> dict[str, dict[str, Any]]:
    """Each task's duration and XCom; raises SystemExit naming the tasks that did not succeed."""
    task_instances = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    failed = {task_id: str(ti.state) for task_id, ti in task_instances.items() if ti.state != "success"}
    if failed or dag_run.state != "success":
        raise SystemExit(f"benchmark DAG run {dag_run.state}: tasks not successful: {failed}")
    return {
        task_id: {"seconds": (ti.end_date - ti.start_date).total_seconds(), **(ti.xcom_pull(task_ids=task_id) or {})}
        for task_id, ti in task_instances.items()
    }


def medians(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each task of the last run, its times the medians over every run; checks what every run returned."""
    for tasks in runs:
        for consumer in CONSUMERS:
            if tasks[f"cached_{consumer}"]["rows"] != tasks[f"recomputed_{consumer}"]["rows"]:
                raise SystemExit(f"{consumer}: the cached and recomputed sides returned different rows")
        statuses = [tasks[f"cached_{c}"]["caches"]["b"]["status"] for c in CONSUMERS]
        if statuses != ["miss", "hit", "hit", "hit"]:
            raise SystemExit(f"cached side: expected one miss then hits, got {statuses}")
    merged = {}
    for task_id, last in runs[-1].items():
        times = {
            measure: statistics.median(tasks[task_id][measure] for tasks in runs)
            for measure in ("seconds", "work_seconds")
            if measure in last
        }
        merged[task_id] = {**last, **times}
    return merged


def report(args: argparse.Namespace, tasks: dict[str, dict[str, Any]], wall_seconds: float, notes: list[str]) -> None:
    print()
    print("=" * 86)
    print(f"cached b vs recomputed b: a = {args.rows:,} rows, b = {args.keys:,} keys, a SHA-256 per row of a")
    print(f"through Airflow: medians of {args.dag_rounds} DAG run(s)")
    print("=" * 86)
    print("seconds; work = Spark work inside the application (session start to result); task = whole task")
    print(
        f"{'consumer':14}{'cache':>6}{'cached work':>13}{'task':>7}{'recomputed work':>17}{'task':>7}{'work ratio':>12}"
    )
    for consumer in CONSUMERS:
        cached, recomputed = tasks[f"cached_{consumer}"], tasks[f"recomputed_{consumer}"]
        ratio = recomputed["work_seconds"] / cached["work_seconds"]
        status = cached["caches"]["b"]["status"]
        print(
            f"{consumer:14}{status:>6}{cached['work_seconds']:13.2f}{cached['seconds']:7.2f}"
            f"{recomputed['work_seconds']:17.2f}{recomputed['seconds']:7.2f}{ratio:11.1f}x"
        )
    readers = [tasks[f"cached_{c}"] for c in list(CONSUMERS)[1:]]
    recompute = statistics.median(tasks[f"recomputed_{c}"]["work_seconds"] for c in CONSUMERS)
    reader_work = statistics.median(r["work_seconds"] for r in readers)
    reader_task = statistics.median(r["seconds"] for r in readers)
    recompute_task = statistics.median(tasks[f"recomputed_{c}"]["seconds"] for c in CONSUMERS)
    speedup = recompute / reader_work
    print()
    print(f"readers of the copy (median): work {reader_work:.2f} s, task {reader_task:.2f} s")
    print(f"recomputing b (median):       work {recompute:.2f} s, task {recompute_task:.2f} s")
    print(
        f"Spark work: {speedup:.1f}x faster ({'MEETS' if speedup >= TARGET_SPEEDUP else 'MISSES'} the "
        f"{TARGET_SPEEDUP:.0f}x target); whole task: {recompute_task / reader_task:.1f}x (each task also pays "
        "spark-submit's JVM and session start)"
    )
    for consumer, reader in zip(list(CONSUMERS)[1:], readers, strict=True):
        ready = reader["caches"]["b"]["seconds"]
        print(f"  {consumer}: making b ready (sizes and CRC-32s checked, view registered) {ready:.2f} s")
    first, first_recomputed = tasks["cached_max_b"], tasks["recomputed_max_b"]
    added = first["work_seconds"] - first_recomputed["work_seconds"]
    print()
    print(
        f"first cached task: work {first['work_seconds']:.2f} s against {first_recomputed['work_seconds']:.2f} s "
        f"recomputed: the copy ({first['caches']['b']['bytes_written']:,} bytes written, described, read back) adds "
        f"{added:+.2f} s = {100 * added / first_recomputed['work_seconds']:+.1f} % "
        f"({'MEETS' if added <= TARGET_WRITE_FRACTION * first_recomputed['work_seconds'] else 'MISSES'} the "
        f"{100 * TARGET_WRITE_FRACTION:.0f} % target)"
    )
    print(f"  of which computing and writing b, describing its partitions: {first['caches']['b']['seconds']:.2f} s")
    cached_total = sum(tasks[f"cached_{c}"]["seconds"] for c in CONSUMERS)
    recomputed_total = sum(tasks[f"recomputed_{c}"]["seconds"] for c in CONSUMERS)
    print()
    print(
        f"the four tasks: cached side {cached_total:.2f} s, recomputed side {recomputed_total:.2f} s "
        f"({recomputed_total / cached_total:.2f}x); make_a (warm-up, writes the class archive) "
        f"{tasks['make_a']['seconds']:.2f} s; release_caches {tasks['release_caches']['seconds']:.2f} s"
    )
    print(f"dag.test wall time {wall_seconds:.2f} s (all runs)")
    for note in notes:
        print(note)
    print("=" * 86)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = fresh_airflow(
        "spark_tables_bench_cache_",
        AIRFLOW__CORE__XCOM_BACKEND="spark_tables.xcom.cache_registry.CacheRegistryXComBackend",
    )
    print(f"working folder: {root}", flush=True)
    with working_in(root, args.keep):
        write_dag_file(__file__, argv)
        dag, runs, wall_seconds, notes = benchmark_dag(argv), [], 0.0, []
        for _ in range(args.dag_rounds):
            dag_run, seconds, machine = run_dag(dag)
            runs.append(collect(dag_run))
            wall_seconds, notes = wall_seconds + seconds, notes + machine
        report(args, medians(runs), wall_seconds, notes)
        # Last: its JVM stays in this process after the session stops, and would share the machine with the DAG.
        in_one_application(args, os.path.join(root, "in_one_application"))
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
