"""FLIP-36's program with the cache root on S3, against the same with it on a local folder: both in one process run.

In one local[2] application (S3A's jars on it from its start), the provider's own job code makes b ready from a miss
(computing it, writing and describing the copy) and from a hit (checking the copy's sizes and CRC-32s, reading it)
for FLIP-36's first consumer, with the copy under a local folder and under ``s3a://`` on an S3-compatible server on
loopback (moto's, ``scripts/s3_server.py``, as the tests start it), the sides rotating round by round; recomputing b
is the reference. Table a (``--rows`` rows) is a local parquet table on both sides.

The S3 side here is moto's in-memory server in Python on the same 2-core machine: it measures what the provider
does differently on object storage (S3A's writes, listing and renames of the committer, s3fs's reads of the
descriptor's files), not a real store's latency or bandwidth.

Usage::

    .venv/bin/python bench/cache_on_s3.py [--rows 30000000] [--keys 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from cache_benefit import B_QUERY, CONSUMERS, DAG_ID, timed_rounds
from harness import reproduce_command

ROOT = Path(__file__).resolve().parents[1]
ACCESS_KEY, SECRET_KEY = "bench-access-key", "bench-secret-key"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=30_000_000, help="rows of table a (default 30,000,000)")
    parser.add_argument("--keys", type=int, default=200_000, help="keys b aggregates a to (default 200,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    return parser.parse_args(argv)


def measure(args: argparse.Namespace, local_root: str, endpoint: str) -> dict[str, list[float]]:
    import boto3
    from pyspark.sql import SparkSession

    from spark_tables.core.cache.descriptor import descriptor_of_copy
    from spark_tables.core.cache.table import CachedTable
    from spark_tables.core.ctas.ownership import TableOwner
    from spark_tables.core.job_spec import CacheUse
    from spark_tables.core.jvm_jars import S3A_JARS
    from spark_tables.core.object_storage import S3Access
    from spark_tables.jobs.cache.views import prepare_cached_views
    from spark_tables.jobs.cancellation import Cancellation

    keys = {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    access = S3Access(credentials=keys, endpoint=endpoint, region="us-east-1")
    os.environ.update(access.environment())  # the JVM and s3fs read them, as a job's driver does
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench")
    builder = SparkSession.builder.master("local[2]").config("spark.log.level", "WARN")
    for key, value in {**access.spark_conf(), "spark.jars": ",".join(S3A_JARS)}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    b, consumer = CachedTable("b", query=B_QUERY), CONSUMERS["max_b"]
    spark.range(args.rows).selectExpr("id", f"id % {args.keys} AS k", "CAST(id % 997 AS DOUBLE) AS v").write.parquet(
        f"{local_root}/a"
    )
    spark.read.parquet(f"{local_root}/a").createOrReplaceTempView("a")
    owner = TableOwner(dag_id=DAG_ID, run_id="cache_on_s3", task_id="bench")
    roots = {"local": f"file://{local_root}/cache", "s3": "s3a://bench/cache"}
    copies: dict[str, list[Any]] = {store: [] for store in roots}

    def recompute(number: int) -> None:
        spark.sql(B_QUERY).createOrReplaceTempView("b")

    def miss(store: str, number: int) -> None:
        reports: dict[str, Any] = {}
        location = f"{roots[store]}/copy_{number}"
        prepare_cached_views(spark, (CacheUse(b, (), location),), Cancellation(), reports)
        copies[store][:] = [descriptor_of_copy("b", b.fingerprint, reports["b"], owner, str(number))]

    def hit(store: str, number: int) -> None:
        reports: dict[str, Any] = {}
        prepare_cached_views(
            spark, (CacheUse(b, tuple(copies[store]), f"{roots[store]}/unused"),), Cancellation(), reports
        )
        if reports["b"]["status"] != "hit":
            raise SystemExit(f"{store}: expected a hit, got {reports['b']}")

    sides = {
        "recompute": recompute,
        "miss local": lambda n: miss("local", n),
        "miss s3": lambda n: miss("s3", n),
        "hit local": lambda n: hit("local", n),
        "hit s3": lambda n: hit("s3", n),
    }
    for store in roots:  # warm-up, and the first copies for a hit
        miss(store, 0)
    # each store first in turn; a miss's copy is read back by its own store's hit in the same round
    orders = [
        ["recompute", *(f"miss {store}" for store in stores), *(f"hit {store}" for store in stores)]
        for stores in (["local", "s3"] if number % 2 else ["s3", "local"] for number in range(1, args.rounds + 1))
    ]
    seconds = timed_rounds(spark, consumer, sides, orders)
    spark.stop()
    return seconds


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    started = datetime.now().astimezone()
    with tempfile.TemporaryDirectory(prefix="spark_tables_bench_s3_") as root:
        server_home = os.path.join(root, "s3-server")
        endpoint = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "s3_server.py"), "start", server_home],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        try:
            seconds = measure(args, root, endpoint)
        finally:
            subprocess.run([sys.executable, str(ROOT / "scripts" / "s3_server.py"), "stop", server_home], check=False)
    median = {side: statistics.median(values) for side, values in seconds.items()}
    print()
    print("=" * 86)
    print(f"FLIP-36's b ({args.rows:,} rows of a, {args.keys:,} keys), cache root on S3 (moto on loopback) vs local")
    print(f"started {started:%Y-%m-%d %H:%M %Z}; reproduce: {command}")
    print("=" * 86)
    for side, values in seconds.items():
        print(f"{side:>10}: median {median[side]:6.2f} s   rounds {', '.join(f'{v:.2f}' for v in values)}")
    for step in ("miss", "hit"):
        ratio = median[f"{step} s3"] / median[f"{step} local"]
        print(
            f"{step}: S3 / local = {ratio:.2f} ({median[f'{step} s3']:.2f} s against {median[f'{step} local']:.2f} s)"
        )
    for store in ("local", "s3"):
        print(f"hit on {store}: {median['recompute'] / median[f'hit {store}']:.1f}x faster than recomputing b")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
