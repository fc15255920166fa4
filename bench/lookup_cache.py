"""What FLIP-221's lookup caches save: one lookup join with ``lookup.cache`` NONE, PARTIAL and FULL against a real
PostgreSQL dimension table, all in one process run, on one local[2] SparkSession.

Each mode runs once, through the provider's own job code (``run_lookup_join``). Measured per mode: the seconds of
the join alone (``time.perf_counter`` around ``run_lookup_join``: reading the probe, the lookups, Spark's noop
sink), rows/s, the job's FLIP metrics, and what PostgreSQL saw of the dimension table, as the change of its index
and sequential scans in ``pg_stat_user_tables`` over the run: NONE's per-key queries are one index scan each;
PARTIAL's one query per Arrow batch for its missing keys counts an index scan per key (a nested loop over the
keys) or per query (a bitmap scan), as PostgreSQL plans it. The FULL snapshot's reload is timed on a line of its
own.

The dimension table ``lookup_bench.customers`` (``--dimension-rows``, ``id integer primary key``) is made anew by
COPY at each run, in database spark_tables_test on 127.0.0.1:5432 (user postgres, trust auth; the database is
created when missing), and its schema dropped at the end. The probe side (``--probe-rows``) has Zipf-distributed
keys (``--zipf``) truncated to 1..dimension-rows by drawing again each key above it, and a fraction
(``--missing``) of keys the table lacks (dimension-rows + k) at random rows. It is written once as parquet and read
as the temporary view ``probe`` in ``--partitions`` partitions.

The runs, in this order, after a throwaway join (NONE, 1,000 rows) that starts the executors' Python workers:

- NONE: a query per probe row. ``--none-rows`` runs it on the probe's first rows only (``probe_row < N``, not a
  LIMIT, which would gather the rows into one partition), and its rows/s is from those;
- PARTIAL: a cache of ``--max-rows`` keys in each executor Python worker;
- PARTIAL+shuffle: the same with ``lookup.shuffle=true`` (the probe hash-partitioned by key first). Its options
  differ, so its workers' caches are its own and start cold;
- PARTIAL+async: PARTIAL with ``lookup.async=true``: a batch's missing keys loaded by concurrent ``lookup_async``
  calls (PostgreSQL: four async connections a worker) instead of one query a batch; its caches start cold too;
- FULL: a reload scans the table into a snapshot, then the join reads the snapshot.

Checks, printed as PASS/FAIL (the exit code is 0 regardless): PARTIAL at least 20x NONE's rows/s and at least half
FULL's (PARTIAL looks each Arrow batch up by distinct key); loadCount equals missCount in the three PARTIAL runs;
the FULL join sends PostgreSQL no per-key query (no index scan while it runs: FULL's loadCount counts snapshot
loads). On a shared machine the absolute figures are noisy: read the ratios.

Usage::

    .venv/bin/python bench/lookup_cache.py [--quick] [--dimension-rows 100000] [--probe-rows 1000000] [--zipf 1.2]
        [--max-rows 10000] [--none-rows N] [--partitions 4] [--missing 0.01] [--keep]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from harness import machine_note, reproduce_command, working_in
from psycopg import sql
from pyspark.sql import SparkSession

from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from spark_tables.core.lookup.job import LookupJoinJob, LookupReloadJob
from spark_tables.core.lookup.options import CacheMode
from spark_tables.core.lookup.table import LookupSpec, SourceTable
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.lookup.join import run_lookup_join
from spark_tables.jobs.lookup.reload import run_lookup_reload

APP_NAME = "spark_tables-bench-lookup-cache"
PG = {"host": "127.0.0.1", "port": 5432, "dbname": "spark_tables_test", "user": "postgres"}
SCHEMA, TABLE_NAME = "lookup_bench", "customers"
TABLE = f"{SCHEMA}.{TABLE_NAME}"
SEGMENTS = ("retail", "smb", "enterprise", "public")
SEED = 221
WARM_UP_ROWS = 1_000
#: PARTIAL's rows/s against NONE's, and against FULL's, at least.
TARGET_SPEEDUP, TARGET_OF_FULL = 20.0, 0.5
FULL_OPTIONS = {"lookup.cache": "FULL", "lookup.full-cache.periodic-reload.interval": "1 h"}
#: Seconds between two reads of PostgreSQL's statistics, the longest wait for them to settle after a run, and how
#: long after its last query an idle backend may still hold counts (PostgreSQL 15's PGSTAT_IDLE_INTERVAL, 10 s).
READ_INTERVAL, MAX_WAIT, IDLE_FLUSH = 1.5, 15.0, 10.5


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 100,000 probe rows, 10,000 dimension rows")
    parser.add_argument("--dimension-rows", type=int, help="rows of the dimension table (default 100,000)")
    parser.add_argument("--probe-rows", type=int, help="rows of the probe side (default 1,000,000)")
    parser.add_argument("--zipf", type=float, default=1.2, help="Zipf exponent of probe keys, above 1 (default 1.2)")
    parser.add_argument("--max-rows", type=int, default=10_000, help="lookup.partial-cache.max-rows (default 10,000)")
    parser.add_argument("--none-rows", type=int, help="probe rows the NONE run joins (default all)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the probe side (default 4)")
    parser.add_argument("--missing", type=float, default=0.01, help="share of probe keys not in the table (0.01)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.dimension_rows is None:
        args.dimension_rows = 10_000 if args.quick else 100_000
    if args.probe_rows is None:
        args.probe_rows = 100_000 if args.quick else 1_000_000
    if args.none_rows is None:
        args.none_rows = args.probe_rows
    if min(args.dimension_rows, args.probe_rows, args.max_rows, args.partitions) < 1:
        parser.error("--dimension-rows, --probe-rows, --max-rows and --partitions must be at least 1")
    if not 1 <= args.none_rows <= args.probe_rows:
        parser.error("need 1 <= --none-rows <= --probe-rows")
    if args.zipf <= 1 or not 0 <= args.missing < 1:
        parser.error("need --zipf > 1 and 0 <= --missing < 1")
    return args


def connect(database: str = PG["dbname"]) -> psycopg.Connection:
    return psycopg.connect(host=PG["host"], port=PG["port"], dbname=database, user=PG["user"], autocommit=True)


def make_dimension(rows: int) -> None:
    """The database if missing; the schema and its table anew, loaded by COPY."""
    with connect("postgres") as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (PG["dbname"],)).fetchone():
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(PG["dbname"])))
    with connect() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        connection.execute(f"CREATE SCHEMA {SCHEMA}")
        connection.execute(
            f"CREATE TABLE {TABLE} (id integer PRIMARY KEY, name text, segment text, amount numeric(12, 2))"
        )
        with connection.cursor() as cursor, cursor.copy(f"COPY {TABLE} FROM STDIN") as copy:
            for key in range(1, rows + 1):
                copy.write_row((key, f"customer-{key}", SEGMENTS[key % len(SEGMENTS)], Decimal(key * 37 % 10**7) / 100))
        connection.execute(f"ANALYZE {TABLE}")


def drop_dimension() -> None:
    with connect() as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def make_probe(args: argparse.Namespace, path: str) -> None:
    """The probe side as parquet: ``probe_row`` (0, 1, ...) and ``customer_id``."""
    rng = np.random.default_rng(SEED)
    keys = rng.zipf(args.zipf, args.probe_rows)
    # Truncated by drawing again every key above the table's: the keys follow the Zipf law restricted to
    # 1..dimension_rows (a modulo would instead spread that tail, about 9 % of the draws at 1.2, evenly).
    while (above := keys > args.dimension_rows).any():
        keys[above] = rng.zipf(args.zipf, int(above.sum()))
    missing = rng.random(args.probe_rows) < args.missing
    keys[missing] = args.dimension_rows + rng.integers(1, args.dimension_rows + 1, int(missing.sum()))
    rows = np.arange(args.probe_rows, dtype=np.int64)
    pd.DataFrame({"probe_row": rows, "customer_id": keys.astype(np.int32)}).to_parquet(path, index=False)


def start_spark(root: str, partitions: int) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers: this interpreter, which has spark_tables
    return (
        SparkSession.builder.master("local[2]")
        .appName(APP_NAME)
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", os.path.join(root, "warehouse"))
        .config("spark.sql.shuffle.partitions", str(partitions))
        # lookup.shuffle's repartition by key keeps the probe's partition count: AQE would otherwise merge the
        # small shuffle partitions into one, and PARTIAL+shuffle would run as one task where the others run several.
        .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "WARN")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.jars", POSTGRES_JDBC_DRIVER)
        .getOrCreate()
    )


@dataclass(frozen=True)
class Scans:
    """Scans of the dimension table counted by PostgreSQL."""

    seq: int
    index: int

    def __sub__(self, other: Scans) -> Scans:
        return Scans(self.seq - other.seq, self.index - other.index)


class ScanCounter:
    """The dimension table's scans in ``pg_stat_user_tables``, read on a connection of the benchmark's own."""

    def __init__(self, connection: psycopg.Connection) -> None:
        self.connection = connection

    def read(self) -> Scans:
        self.connection.execute("SELECT pg_stat_clear_snapshot()")
        row = self.connection.execute(
            "SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables "
            "WHERE schemaname = %s AND relname = %s",
            (SCHEMA, TABLE_NAME),
        ).fetchone()
        return Scans(*row)

    def settled(self, before: Scans, index_scans: int | None) -> tuple[Scans, bool]:
        """The scans since ``before`` once PostgreSQL has counted them, and whether it had within ``MAX_WAIT``.

        A PostgreSQL 15 backend adds its counts to the shared statistics at the end of a transaction at most once a
        second, and an idle backend its last ones up to 10 s (PGSTAT_IDLE_INTERVAL) after its last query. The
        executors' Python workers keep their connections open, idle, between jobs: right after a join PostgreSQL
        may not have counted its last queries yet. This is a benchmark, not a test, so it waits, re-reading every
        ``READ_INTERVAL`` seconds, for ``MAX_WAIT`` at most: until two consecutive reads agree and, when the index
        scans to expect are known (``index_scans``: NONE's per-key queries), they have been reached; else until
        ``IDLE_FLUSH`` has passed (two equal reads alone could come before an idle backend's flush).
        """
        started = time.monotonic()
        current = self.read() - before
        while True:
            time.sleep(READ_INTERVAL)
            previous, current = current, self.read() - before
            waited = time.monotonic() - started
            counted = current.index >= index_scans if index_scans is not None else waited >= IDLE_FLUSH
            if current == previous and counted:
                return current, True
            if waited >= MAX_WAIT:
                return current, False


@dataclass(frozen=True)
class Run:
    mode: str
    rows: int
    seconds: float
    metrics: dict[str, Any]
    scans: Scans
    settled: bool

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def lookup_spec(root: str, options: dict[str, str]) -> LookupSpec:
    source = SourceTable(kind="postgres", connection=dict(PG), table=TABLE, key=("id",))
    return LookupSpec(name=TABLE_NAME, source=source, options=options, snapshots=Path(root, "snapshots").as_uri())


def run_join(spark: SparkSession, counter: ScanCounter, spec: LookupSpec, mode: str, rows: int, root: str) -> Run:
    """One lookup join of the probe's first ``rows`` rows into the noop sink, timed, with PostgreSQL's counts."""
    slug = mode.lower().replace("+", "-")
    job = LookupJoinJob(
        lookup=spec,
        on=("customer_id",),
        metrics_uri=Path(root, f"metrics-{slug}").as_uri(),
        probe=f"SELECT * FROM probe WHERE probe_row < {rows}",
    )
    before = counter.read()
    started = time.perf_counter()
    output = run_lookup_join(spark, job, Cancellation())
    seconds = time.perf_counter() - started
    if output.rows != rows:
        raise SystemExit(f"{mode}: the join returned {output.rows:,} rows for {rows:,} probe rows")
    per_key_queries = output.metrics["loadCount"] if spec.lookup_options.cache is CacheMode.NONE else None
    scans, settled = counter.settled(before, per_key_queries)
    print(f"{mode}: {rows:,} probe rows in {seconds:.2f} s", flush=True)
    return Run(mode, rows, seconds, output.metrics, scans, settled)


def report(args: argparse.Namespace, runs: dict[str, Run], reload: dict[str, Any], notes: list[str]) -> None:
    print()
    print("=" * 140)
    print(
        f"lookup joins on local[2]: dimension {TABLE} {args.dimension_rows:,} rows; probe {args.probe_rows:,} rows, "
        f"Zipf a={args.zipf} over 1..{args.dimension_rows:,}, {100 * args.missing:g} % keys not in the table, "
        f"{args.partitions} partitions; lookup.partial-cache.max-rows {args.max_rows:,}"
    )
    print(f"NONE ran on the first {runs['NONE'].rows:,} probe rows; the other modes on all {args.probe_rows:,}")
    print("=" * 140)
    header = (
        f"{'mode':16}{'rows':>10}{'seconds':>9}{'rows/s':>11}{'loadCount':>11}{'PG index':>10}{'PG seq':>8}"
        f"{'hitCount':>10}{'missCount':>11}{'hitRate':>9}{'cachedRecs':>12}{'cachedBytes':>13}"
    )
    print(header)
    for run in runs.values():
        m = run.metrics
        index = f"{run.scans.index:,}{'' if run.settled else '*'}"
        print(
            f"{run.mode:16}{run.rows:>10,}{run.seconds:9.2f}{run.rate:>11,.0f}{m['loadCount']:>11,}{index:>10}"
            f"{run.scans.seq:>8,}{m['hitCount']:>10,}{m['missCount']:>11,}{m['hitRate']:9.3f}"
            f"{m['numCachedRecords']:>12,}{m['numCachedBytes']:>13,}"
        )
    print("loadCount: the keys the job loaded from PostgreSQL (FULL: the snapshot's loads, not per-key queries)")
    print(
        "PG index, PG seq: index and sequential scans of the table PostgreSQL counted during the join (NONE: one a "
        "query; PARTIAL's batched queries: one a key or one a query, as planned)"
    )
    if not all(run.settled for run in runs.values()):
        print(f"*: PostgreSQL's count had not settled {MAX_WAIT:.0f} s after the join: it may lag")
    snapshot, reload_scans = reload["snapshot"], reload["scans"]
    print(
        f"FULL reload (before the FULL join, not in its seconds): {reload['seconds']:.2f} s, snapshot of "
        f"{snapshot['rows']:,} rows, {snapshot['bytes']:,} bytes; PostgreSQL saw {reload_scans.seq} sequential and "
        f"{reload_scans.index} index scans{'' if reload['settled'] else ' (not settled: may lag)'}"
    )
    none, partial, shuffled, asynchronous, full = (
        runs[mode] for mode in ("NONE", "PARTIAL", "PARTIAL+shuffle", "PARTIAL+async", "FULL")
    )
    speedup, of_full = partial.rate / none.rate, partial.rate / full.rate
    print()
    print(f"PARTIAL rows/s / NONE rows/s:         {speedup:8.1f}x (target >= {TARGET_SPEEDUP:.0f}x)")
    print(f"PARTIAL rows/s / FULL rows/s:         {of_full:8.2f}x (target >= {TARGET_OF_FULL:.1f}x)")
    print(f"PARTIAL+shuffle rows/s / NONE rows/s: {shuffled.rate / none.rate:8.1f}x")
    print(f"PARTIAL+async rows/s / NONE rows/s:   {asynchronous.rate / none.rate:8.1f}x")
    print(f"FULL rows/s / NONE rows/s:            {full.rate / none.rate:8.1f}x")
    hit_rate, shuffled_hit_rate = partial.metrics["hitRate"], shuffled.metrics["hitRate"]
    print(
        f"hit rate: PARTIAL+shuffle {shuffled_hit_rate:.3f} vs PARTIAL {hit_rate:.3f} "
        f"({100 * (shuffled_hit_rate - hit_rate):+.1f} points; misses {shuffled.metrics['missCount']:,} vs "
        f"{partial.metrics['missCount']:,})"
    )
    print()
    checks = [
        (speedup >= TARGET_SPEEDUP, f"PARTIAL rows/s >= {TARGET_SPEEDUP:.0f}x NONE rows/s ({speedup:.1f}x)"),
        (of_full >= TARGET_OF_FULL, f"PARTIAL rows/s >= {TARGET_OF_FULL:.1f}x FULL rows/s ({of_full:.2f}x)"),
    ]
    for run in (partial, shuffled, asynchronous):
        loads, misses = run.metrics["loadCount"], run.metrics["missCount"]
        checks.append((loads == misses, f"{run.mode}: loadCount == missCount ({loads:,} vs {misses:,})"))
    checks.append(
        (full.scans.index == 0, f"FULL: no per-key query (PostgreSQL index scans during the join: {full.scans.index})")
    )
    for passed, what in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {what}")
    print()
    for note in notes:
        print(note)
    print("=" * 140)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_lookup_", dir="/tmp")
    print(f"working folder: {root}", flush=True)
    with working_in(root, args.keep):
        make_dimension(args.dimension_rows)
        probe = os.path.join(root, "probe.parquet")
        make_probe(args, probe)
        spark = start_spark(root, args.partitions)
        try:
            spark.read.parquet(probe).repartition(args.partitions).createOrReplaceTempView("probe")
            with connect() as connection:
                counter = ScanCounter(connection)
                partial = {"lookup.cache": "PARTIAL", "lookup.partial-cache.max-rows": str(args.max_rows)}
                none_spec = lookup_spec(root, {"lookup.cache": "NONE"})
                notes = [machine_note("before", APP_NAME)]
                run_join(spark, counter, none_spec, "warm-up", min(WARM_UP_ROWS, args.probe_rows), root)
                runs = {
                    "NONE": run_join(spark, counter, none_spec, "NONE", args.none_rows, root),
                    "PARTIAL": run_join(spark, counter, lookup_spec(root, partial), "PARTIAL", args.probe_rows, root),
                }
                shuffled = lookup_spec(root, {**partial, "lookup.shuffle": "true"})
                runs["PARTIAL+shuffle"] = run_join(spark, counter, shuffled, "PARTIAL+shuffle", args.probe_rows, root)
                asynchronous = lookup_spec(root, {**partial, "lookup.async": "true"})
                runs["PARTIAL+async"] = run_join(spark, counter, asynchronous, "PARTIAL+async", args.probe_rows, root)
                full = lookup_spec(root, FULL_OPTIONS)
                before = counter.read()
                started = time.perf_counter()
                reloaded = run_lookup_reload(spark, LookupReloadJob(lookup=full, num_partitions=2), Cancellation())
                seconds = time.perf_counter() - started
                scans, settled = counter.settled(before, None)
                reload = {"seconds": seconds, "snapshot": reloaded.snapshot, "scans": scans, "settled": settled}
                print(f"FULL reload: {seconds:.2f} s", flush=True)
                runs["FULL"] = run_join(spark, counter, full, "FULL", args.probe_rows, root)
                notes.append(machine_note("after", APP_NAME))
        finally:
            spark.stop()
            drop_dimension()
        report(args, runs, reload, notes)
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
