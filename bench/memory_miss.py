"""Where a miss goes when a cached table is kept in a Spark Connect server's memory: the task that computes b keeps it
there (``jobs/cache/memory.keep_in_memory``: the server's parallelism asked, b coalesced to it under a global
temporary view, ``CACHE TABLE``, its plan statistics read), against computing b alone, both on one server in one run.

b is ``bench/cache_benefit.py``'s (a SHA-256 per row of a, ``--rows`` rows, aggregated to ``--keys`` keys). Each round
opens a session of its own, as a task does, and measures in turn: computing b alone (Spark's ``noop`` sink: every row
made, none sent to the client), the parallelism ask, keeping b in memory (all of ``keep_in_memory``), and reading the
kept copy (``noop`` again); then it releases the copy. The first round runs on a server just started (its JIT cold),
as the first task after a restart does; the medians are over the others.

Usage::

    .venv/bin/python bench/memory_miss.py [--rows 3000000] [--keys 200000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import datetime

from cache_benefit import B_QUERY
from harness import connect_server, fmt, machine_note, med, reproduce_command

from spark_tables.hooks.spark_connect_job import connect_session
from spark_tables.jobs.cache.memory import keep_in_memory, release
from spark_tables.jobs.session_facts import application_id, default_parallelism

STEPS = ("compute b alone", "ask the parallelism", "keep b in memory", "read the kept copy")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    if args.rows < 1 or not 1 <= args.keys <= args.rows or args.rounds < 2:
        parser.error("need rows >= keys >= 1 and at least 2 rounds (the first one's server is cold)")
    return args


def one_round(url: str, a: str, number: int) -> dict[str, float]:
    seconds: dict[str, float] = {}

    def timed(step: str, work: object) -> object:
        started = time.monotonic()
        result = work()  # type: ignore[operator]
        seconds[step] = time.monotonic() - started
        return result

    with connect_session(f"{url}/;session_id={uuid.uuid4()}") as spark:
        spark.read.parquet(a).createOrReplaceTempView("a")
        timed(STEPS[0], lambda: spark.sql(B_QUERY).write.format("noop").mode("overwrite").save())
        timed(STEPS[1], lambda: default_parallelism(spark))
        location, _, _ = timed(STEPS[2], lambda: keep_in_memory(spark, spark.sql(B_QUERY), f"bench_b_{number}"))
        qualified = location.split("/", 1)[1]
        timed(STEPS[3], lambda: spark.table(qualified).write.format("noop").mode("overwrite").save())
        release(spark, qualified)
    return seconds


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="bench-memory-miss-")
    started = datetime.now().isoformat(timespec="seconds")
    with connect_server(root) as connection:
        url = f"sc://127.0.0.1:{json.loads(connection)['port']}"
        a = os.path.join(root, "a")
        with connect_session(url) as spark:
            frame = spark.range(args.rows).selectExpr("id", f"id % {args.keys} AS k", "CAST(id % 997 AS DOUBLE) AS v")
            frame.write.parquet(a)
            note_before = machine_note("before", application_id(spark))
        rounds = []
        for number in range(args.rounds):
            rounds.append(one_round(url, a, number))
            print(f"round {number + 1}: " + ", ".join(f"{s} {rounds[-1][s]:.2f} s" for s in STEPS), flush=True)
    print()
    print(f"{started}: a miss kept in memory against computing b alone; a = {args.rows:,} rows, b = {args.keys:,} keys")
    print(note_before)
    warm = rounds[1:]
    print(f"{'step':<24} {'cold':>6} {'median':>6}  (seconds; median of rounds 2-{args.rounds})")
    for step in STEPS:
        print(f"{step:<24} {fmt(rounds[0][step])} {fmt(med([r[step] for r in warm]))}")
    compute, keep = med([r[STEPS[0]] for r in warm]), med([r[STEPS[2]] for r in warm])
    assert compute is not None and keep is not None
    print(f"keeping b costs {keep / compute:.2f}x computing it alone (+{keep - compute:.2f} s a miss)")
    print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
