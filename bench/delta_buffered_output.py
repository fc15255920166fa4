"""What FLIP-365's buffered output saves on Delta Lake: the FLIP's page views counted per page into a Delta table
kept by key (``TableUpsertSink``: a MERGE a write), buffered against unbuffered, in one process run.

The stream is ``buffered_output.py``'s: a seeded stream of ``--events`` page views over ``--pages`` pages
(Zipf-distributed) in ``--files`` JSON files; the job is Spark's own streaming aggregation (``SELECT page, count(*)
AS views FROM STREAM(views) GROUP BY page``, as ``SparkStreamingAggregationOperator`` runs it), available-now, a
micro-batch a file, from its own checkpoint into its own Delta table: ``unbuffered``, and ``buffered``
(``execution.flush.max-interval`` = ``--interval`` seconds of the micro-batches' processing time: the buffer in the
state store, as in front of every catalog table). (Not a run for a time with files arriving as
``buffered_output.py`` runs: unbuffered, a MERGE a micro-batch takes longer than a file's period on this machine, so
that side falls behind and ends with files unread.) The sides take turns over ``--rounds`` rounds.

Reported per side, from the sink's counts (the commits' metrics in the table's log, never a scan): commits, data
files written, rows merged; the run's wall time (the job, from its start to its end); and the table's data files
at the end (``DESCRIBE DETAIL``'s ``numFiles``, outside the runs). Checked: every final
table equals the stream's counts.

Usage::

    .venv/bin/python bench/delta_buffered_output.py [--events 120000] [--pages 500] [--files 60] [--interval 10]
        [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from buffered_output import AGGREGATION_QUERY, checked_stream_arguments, stream, stream_arguments, stream_table
from harness import local_spark, machine_note, reproduce_command, working_in
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import TableUpsertSink
from spark_tables.core.table_format.delta import DELTA
from spark_tables.jobs.aggregation.runner import run_streaming_aggregation
from spark_tables.jobs.cancellation import Cancellation

APP_NAME = "spark_tables-bench-delta-buffered-output"
DATABASE = "delta_buffer_bench"
SIDES = ("unbuffered", "buffered")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    stream_arguments(parser)
    return checked_stream_arguments(parser, argv)


def side_run(
    spark: SparkSession, args: argparse.Namespace, root: str, label: str, files: list[list[str]], side: str
) -> dict[str, Any]:
    """One side's run from a new source folder, checkpoint and Delta table."""
    stream_table(spark, DATABASE, os.path.join(root, label, "views"), files)
    table = f"{DATABASE}.counts_{label}"
    spark.sql(f"CREATE TABLE {table} (page STRING, views BIGINT) USING delta")
    configuration = {"execution.flush.max-interval": f"{int(args.interval * 1000)} ms"} if side == "buffered" else {}
    sink = TableUpsertSink(name=table, key=("page",))
    job = StreamingAggregationJob(
        AGGREGATION_QUERY, sink, os.path.join(root, label, "checkpoint"), StreamingOptions(configuration=configuration)
    )
    started = time.monotonic()
    query = run_streaming_aggregation(spark, job, Cancellation()).query
    wall_s = time.monotonic() - started
    detail = spark.sql(f"DESCRIBE DETAIL {table}").first()
    return {
        "commits": query["write_calls"],
        "files_written": query["files_written"],
        "rows_merged": query["rows_upserted"],
        "wall_s": wall_s,
        "table_files": detail["numFiles"],
        "final": {row["page"]: row["views"] for row in spark.table(table).collect()},
    }


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = tempfile.mkdtemp(prefix="spark_tables_bench_delta_buffer_", dir="/tmp")
    started = time.monotonic()
    files = stream(args)
    expected = collections.Counter(page for pages in files for page in pages)
    with working_in(root, args.keep):
        notes = [machine_note("before", APP_NAME)]
        spark = local_spark(
            APP_NAME,
            root,
            **{
                "spark.sql.catalogImplementation": "in-memory",
                "spark.jars": ",".join(DELTA.jars),
                "spark.sql.extensions": DELTA.extensions,
                "spark.sql.catalog.spark_catalog": DELTA.session_catalog,
            },
        )
        spark.sql(f"CREATE DATABASE {DATABASE}")
        spark.sql(f"USE {DATABASE}")  # the query reads STREAM(views)
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
        try:
            for number in range(args.rounds):
                for side in SIDES[number % 2 :] + SIDES[: number % 2]:
                    run = side_run(spark, args, root, f"{side}_{number}", files, side)
                    runs[side].append(run)
                    print(
                        f"  round {number + 1}: {side:<10} {run['commits']:4} commits, {run['files_written']:5} "
                        f"files written, {run['rows_merged']:7,} rows merged, "
                        f"{run['wall_s']:6.1f} s, {run['table_files']} files in the table at the end",
                        flush=True,
                    )
            notes.append(machine_note("after", APP_NAME))
        finally:
            spark.stop()
        print()
        print("=" * 110)
        print(
            f"FLIP-365 into Delta Lake, {datetime.now(UTC):%Y-%m-%d}: {args.events:,} views of {args.pages:,} pages "
            f"in {args.files} files, a micro-batch a file, max-interval {args.interval} s, one local[2] application, "
            f"Spark streaming aggregation available-now, {args.rounds} round(s)"
        )
        print("=" * 110)

        def median(side: str, key: str) -> float:
            return statistics.median(run[key] for run in runs[side])

        print(f"{'side':12}{'commits':>9}{'files written':>15}{'rows merged':>13}{'wall':>9}{'table files':>13}")
        for side in SIDES:
            print(
                f"{side:12}{median(side, 'commits'):9,.0f}{median(side, 'files_written'):15,.0f}"
                f"{median(side, 'rows_merged'):13,.0f}{median(side, 'wall_s'):7.1f} s"
                f"{median(side, 'table_files'):13,.0f}"
            )
        pairs = (("commits", "commits"), ("files_written", "files written"), ("rows_merged", "rows merged"))
        for key, what in (*pairs, ("wall_s", "wall time"), ("table_files", "files in the table")):
            print(f"buffered / unbuffered {what}: {median('buffered', key) / median('unbuffered', key):.3f}")
        same = all(run["final"] == dict(expected) for side in SIDES for run in runs[side])
        print(
            f"{'PASS' if same else 'FAIL'}  every run's final table equals the stream's counts "
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
