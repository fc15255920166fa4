"""Session mode against per-job mode: FLIP-36's program through Airflow, each task once through spark-submit and once
on a Spark Connect server, both sides in one DAG run.

The program is ``bench/cache_benefit.py``'s: table a (``--rows`` rows), then b (a SHA-256 per row of a, aggregated
to ``--keys`` keys) cached and read by four consumers, the first of which computes it (a miss) while the other three
read its copy (hits). One DAG, run by ``dag.test()`` as a user would, holds both sides, their tasks interleaved, each
side going first in turn:

- per-job: every task starts its own application through spark-submit (``spark_default``: ``local[*]``), on the
  embedded catalog;
- session: every task is a Spark Connect client of one server this script starts from the venv's pyspark
  (``local[2]``, an in-memory catalog), through a ``spark_connect`` connection (``spark_session``).

Each side has its own cached table (``b_per_job``, ``b_session``: the same query), so that neither reads the other's
copy. Both sides must return the same rows.

Reported, per task and side: the whole task (Airflow's start to end), the session's start (the JVM and application
for per-job mode; the Connect session, its checks and the shipped code for session mode), the Spark work (session
start to result) and the rest (Airflow's own part of the task); the cache's status and the time the job took to make
b ready. The targets (issue 28): a cache-hit task's whole duration in session mode at most 1.5 s; the four consumers
together at least 5x faster than in per-job mode; no task of session mode slower than its per-job twin.

Usage::

    .venv/bin/python bench/session_mode.py [--rows 3000000] [--keys 200000] [--dag-rounds 1]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
from datetime import datetime
from typing import Any

from cache_benefit import B_QUERY, CONSUMERS, collect
from harness import connect_server, fresh_airflow, reproduce_command, run_dag, working_in, write_dag_file

DAG_ID = "spark_tables_session_mode"
#: Each side's Spark connection: the local spark-submit, and the Spark Connect server this script starts.
SIDES = {"per_job": "spark_default", "session": "spark_session"}
TARGET_HIT_SECONDS = 1.5
TARGET_SPEEDUP = 5.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows of table a (default 3,000,000)")
    parser.add_argument("--keys", type=int, default=200_000, help="keys b aggregates a to (default 200,000)")
    parser.add_argument("--dag-rounds", type=int, default=1, help="DAG runs through Airflow (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rows < 1 or not 1 <= args.keys <= args.rows:
        parser.error("need 1 <= --keys <= --rows")
    if args.dag_rounds < 1:
        parser.error("--dag-rounds must be at least 1")
    return args


def cached_b(side: str) -> Any:
    from spark_tables.core.cache.table import CachedTable

    return CachedTable(f"b_{side}", query=B_QUERY)


def build_dag(args: argparse.Namespace) -> Any:
    from airflow.sdk import DAG, chain

    from spark_tables.operators.cache import release_caches
    from spark_tables.operators.ctas import SparkCtasOperator
    from spark_tables.operators.sql import SparkSqlJobOperator

    make_a = f"""CREATE TABLE IF NOT EXISTS a AS SELECT id, id % {args.keys} AS k, CAST(id % 997 AS DOUBLE) AS v
                 FROM range({args.rows})"""
    with DAG(dag_id=DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        order = [SparkCtasOperator(task_id=f"make_a_{side}", conn_id=conn, sql=make_a) for side, conn in SIDES.items()]
        for number, (consumer, sql) in enumerate(CONSUMERS.items()):
            sides = list(SIDES) if number % 2 else list(reversed(SIDES))
            for side in sides:
                b = cached_b(side)
                query = re.sub(r"\bb\b", b.name, sql)
                order.append(
                    SparkSqlJobOperator(task_id=f"{consumer}_{side}", conn_id=SIDES[side], sql=query, caches=[b])
                )
        chain(*order)
        release_caches()
    return dag


def benchmark_dag(argv: list[str]) -> Any:
    """The DAG of this benchmark, for its DAG file (``harness.write_dag_file``)."""
    return build_dag(parse_args(argv))


def check(tasks: dict[str, dict[str, Any]]) -> None:
    """Both sides returned the same rows; each read b as one miss, then hits; each ran in its mode."""
    for consumer in CONSUMERS:
        if not same_rows(tasks[f"{consumer}_per_job"]["rows"], tasks[f"{consumer}_session"]["rows"]):
            raise SystemExit(f"{consumer}: the two modes returned different rows")
    for side in SIDES:
        statuses = [tasks[f"{c}_{side}"]["caches"][f"b_{side}"]["status"] for c in CONSUMERS]
        if statuses != ["miss", "hit", "hit", "hit"]:
            raise SystemExit(f"{side}: expected one miss then hits, got {statuses}")
        modes = {tasks[f"{c}_{side}"]["mode"] for c in CONSUMERS}
        if modes != {side.replace("_", "-")}:
            raise SystemExit(f"{side}: the tasks ran in mode {modes}")


def same_rows(one: list[list[Any]], other: list[list[Any]]) -> bool:
    """The same rows, floating-point sums equal to 12 digits: the two copies of b have other partitions, so a sum
    over them adds in another order."""
    if len(one) != len(other) or any(len(a) != len(b) for a, b in zip(one, other, strict=True)):
        return False
    return all(
        math.isclose(x, y, rel_tol=1e-12) if isinstance(x, float) else x == y
        for a, b in zip(one, other, strict=True)
        for x, y in zip(a, b, strict=True)
    )


def medians(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each task of the last run, its times the medians over every run."""
    merged = {}
    for task_id, last in runs[-1].items():
        times = {
            measure: statistics.median(tasks[task_id][measure] for tasks in runs)
            for measure in ("seconds", "session_seconds", "work_seconds")
            if last.get(measure) is not None
        }
        merged[task_id] = {**last, **times}
    return merged


def parts(task: dict[str, Any]) -> tuple[float, float, float, float]:
    """A task's whole seconds, its session's start, its Spark work, and the rest (Airflow's part)."""
    whole, session, work = task["seconds"], task.get("session_seconds") or 0.0, task.get("work_seconds") or 0.0
    return whole, session, work, whole - session - work


def report(args: argparse.Namespace, tasks: dict[str, dict[str, Any]], wall_seconds: float, notes: list[str]) -> None:
    print()
    print("=" * 100)
    print(f"FLIP-36's program, per-job mode vs session mode: a = {args.rows:,} rows, b = {args.keys:,} keys")
    print(f"through Airflow (dag.test): medians of {args.dag_rounds} DAG run(s), both modes in each run")
    print("=" * 100)
    print("pj = per-job mode, sess = session mode; ratio = per-job task / session task")
    print("seconds: task = whole task; start = JVM and application (per-job) or Connect session (session);")
    print("work = Spark work (session start to result); rest = Airflow's part; ready = making b ready in the job")
    columns = [f"{side} {m}" for side in ("pj", "sess") for m in ("task", "start", "work", "rest")]
    print(f"{'task':14}{'cache':>7}" + "".join(f"{c:>11}" for c in columns) + f"{'ratio':>11}")
    slower = []
    for name in ["make_a", *CONSUMERS]:
        row = f"{name:14}"
        status = tasks[f"{name}_session"].get("caches", {}).get("b_session", {}).get("status", "")
        row += f"{status:>7}"
        for side in SIDES:
            row += "".join(f"{value:11.2f}" for value in parts(tasks[f"{name}_{side}"]))
        ratio = tasks[f"{name}_per_job"]["seconds"] / tasks[f"{name}_session"]["seconds"]
        print(f"{row}{ratio:10.1f}x")
        if tasks[f"{name}_session"]["seconds"] > tasks[f"{name}_per_job"]["seconds"]:
            slower.append(name)
    for consumer in CONSUMERS:
        ready = {side: tasks[f"{consumer}_{side}"]["caches"][f"b_{side}"]["seconds"] for side in SIDES}
        print(f"  {consumer}: b ready in {ready['per_job']:.2f} s (per-job), {ready['session']:.2f} s (session)")

    hits = [tasks[f"{c}_session"] for c in list(CONSUMERS)[1:]]
    hit_task = statistics.median(hit["seconds"] for hit in hits)
    totals = {side: sum(tasks[f"{c}_{side}"]["seconds"] for c in CONSUMERS) for side in SIDES}
    speedup = totals["per_job"] / totals["session"]
    print()
    print(
        f"a cache-hit task in session mode (median of three): {hit_task:.2f} s "
        f"({'MEETS' if hit_task <= TARGET_HIT_SECONDS else 'MISSES'} the {TARGET_HIT_SECONDS} s target)"
    )
    _, session, work, rest = (statistics.median(p) for p in zip(*(parts(h) for h in hits), strict=True))
    ready = statistics.median(h["caches"]["b_session"]["seconds"] for h in hits)
    print(
        f"  where it goes: Connect session {session:.2f} s, Spark work {work:.2f} s (of which making b ready "
        f"{ready:.2f} s), Airflow {rest:.2f} s"
    )
    print(
        f"the four consumers: per-job {totals['per_job']:.2f} s, session {totals['session']:.2f} s: {speedup:.1f}x "
        f"({'MEETS' if speedup >= TARGET_SPEEDUP else 'MISSES'} the {TARGET_SPEEDUP:.0f}x target)"
    )
    verdict = "MEETS" if not slower else "MISSES"
    print(f"session tasks slower than their per-job twins: {', '.join(slower) or 'none'} ({verdict} the target)")
    release = tasks["release_caches"]["seconds"]
    print(f"release_caches {release:.2f} s; dag.test wall time {wall_seconds:.2f} s (all runs)")
    for note in notes:
        print(note)
    print("=" * 100)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = fresh_airflow(
        "spark_tables_bench_session_",
        AIRFLOW__CORE__XCOM_BACKEND="spark_tables.xcom.cache_registry.CacheRegistryXComBackend",
    )
    print(f"working folder: {root}", flush=True)
    with working_in(root, args.keep), connect_server(root) as connection:
        os.environ["AIRFLOW_CONN_SPARK_SESSION"] = connection
        write_dag_file(__file__, argv)
        dag, runs, wall_seconds, notes = benchmark_dag(argv), [], 0.0, []
        for _ in range(args.dag_rounds):
            dag_run, seconds, machine = run_dag(dag)
            tasks = collect(dag_run)
            check(tasks)
            runs.append(tasks)
            wall_seconds, notes = wall_seconds + seconds, notes + machine
        report(args, medians(runs), wall_seconds, notes)
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
