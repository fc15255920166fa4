"""What the drivers' class-data archive saves: the same small job submitted with and without it, alternately.

Each side runs the provider's own ``SparkJobHook`` (real spark-submit, the embedded catalog, a one-statement SQL
job over ``range(--rows)``) in this process; the two sides alternate round by round after a warm-up run that
writes the archive (not counted). Reported: wall time of each submission, the driver's session start and the
job's work, medians, and the ratio without / with.

Usage::

    .venv/bin/python bench/class_archive.py [--rounds 5] [--rows 1000000] [--keep]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from harness import fresh_airflow, machine_note, reproduce_command, working_in

MARK = "spark_tables_bench_class_archive"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="with/without pairs to run (default 5)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of range(N) the job aggregates")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < 1:
        parser.error("--rounds and --rows must be at least 1")
    return args


def submit(rows: int, archive: str, tag: str) -> tuple[float, float, float]:
    """Run the job once with ``[spark_tables] jvm_class_archive = archive``: wall, session and work seconds."""
    from spark_tables.core.catalog_config import EmbeddedCatalog
    from spark_tables.core.job_spec import JobSpec
    from spark_tables.core.sql.job import SqlJob
    from spark_tables.hooks.spark_job import SparkJobHook
    from spark_tables.utils import settings

    os.environ["AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE"] = archive
    job = SqlJob(statements=(f"SELECT count(*), sum(id % 7) FROM range({rows})",))
    result_uri = f"file://{settings.home()}/exchange/{tag}.json"
    hook = SparkJobHook(
        spec=JobSpec(job=job, result_uri=result_uri), catalog=EmbeddedCatalog(settings.home()), name=f"{MARK}.{tag}"
    )
    started = time.monotonic()
    result = hook.run()
    return time.monotonic() - started, result.session_seconds or 0.0, result.work_seconds or 0.0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = fresh_airflow("spark_tables_bench_archive_")
    archive = os.path.join(root, "jvm")
    with working_in(root, args.keep):
        notes = [machine_note("before", MARK)]
        warm_up = submit(args.rows, archive, "warmup")
        sides: dict[str, list[tuple[float, float, float]]] = {"without": [], "with": []}
        for number in range(1, args.rounds + 1):
            sides["without"].append(submit(args.rows, "off", f"without_{number}"))
            sides["with"].append(submit(args.rows, archive, f"with_{number}"))
        notes.append(machine_note("after", MARK))

        print()
        print("=" * 78)
        print(f"spark-submit of a one-statement job, {args.rounds} rounds, with and without the class archive")
        print("=" * 78)
        print(f"warm-up that writes the archive (not counted): {warm_up[0]:.2f} s")
        print(f"{'round':>5}  {'without':>8}  {'with':>8}   (wall seconds of hook.run())")
        for number, (off, on) in enumerate(zip(sides["without"], sides["with"], strict=True), start=1):
            print(f"{number:>5}  {off[0]:8.2f}  {on[0]:8.2f}")
        print(f"{'median':>14}{'wall':>8}{'session':>9}{'work':>7}")
        medians = {}
        for side, runs in sides.items():
            medians[side] = [statistics.median(run[i] for run in runs) for i in range(3)]
            wall, session, work = medians[side]
            print(f"{side:>14}{wall:8.2f}{session:9.2f}{work:7.2f}")
        saved = medians["without"][0] - medians["with"][0]
        print(f"saved per submission: {saved:.2f} s; without / with: {medians['without'][0] / medians['with'][0]:.2f}x")
        size = sum(os.path.getsize(os.path.join(archive, f)) for f in os.listdir(archive))
        print(f"archive size: {size / 2**20:.0f} MiB")
        for note in notes:
            print(note)
        print("=" * 78)
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
