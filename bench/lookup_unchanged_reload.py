"""A FULL lookup reload of a Delta dimension table that finds the table unchanged, against one that copies a new
version, both through ``SparkLookupReloadOperator`` in one DAG run.

The table is a Delta table of the embedded catalog (its connection loading Delta), ``range(N)`` rows; the lookup
table is ``LookupTable.in_catalog`` on it. One DAG run by ``dag.test()``, one task at a time, through real
spark-submit and real Airflow: ``make`` (a SQL job: the table), ``copy_1`` (a reload: copies its version),
``unchanged_1 .. unchanged_R`` (reloads: the table is at the version the snapshot holds), ``change`` (a SQL job: an
UPDATE, a new version), ``copy_2`` (copies that one), then ``unchanged_R+1 .. unchanged_2R``. (The SQL job's CTAS is
two commits: the table, then its completion mark.)

Each task's time is its task instance's ``end_date - start_date``. The bench checks, from each task's XCom and the
lookup root, that the unchanged reloads ran no Spark application, wrote no snapshot and counted no load, and that
the copies copied the version they say; the verdict takes the slowest unchanged reload against the issue's target
(under 1 s of work), and prints the median copy's time beside it.

Usage::

    .venv/bin/python bench/lookup_unchanged_reload.py [--rounds 5] [--rows 2000000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

from harness import fmt, fresh_airflow, reproduce_command, run_dag, working_in, write_dag_file

DAG_ID = "spark_tables_lookup_unchanged_reload"
TABLE = "bench_lookup.dims"
#: The embedded catalog of this run's home, loading Delta Lake: the provider's default catalog connection.
CATALOG_CONNECTION = {"conn_type": "spark_tables", "extra": {"table-formats": ["delta"]}}
TARGET_SECONDS = 1.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="unchanged reloads after each copy (default 5)")
    parser.add_argument("--rows", type=int, default=2_000_000, help="rows of the dimension table")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < 1:
        parser.error("--rounds and --rows must be at least 1")
    return args


def task_order(rounds: int) -> list[str]:
    unchanged = [f"unchanged_{number}" for number in range(1, 2 * rounds + 1)]
    return ["make", "copy_1", *unchanged[:rounds], "change", "copy_2", *unchanged[rounds:]]


def benchmark_dag(argv: list[str]) -> Any:
    import pendulum
    from airflow.sdk import DAG, chain

    from spark_tables.core.lookup.table import LookupTable
    from spark_tables.operators.lookup import SparkLookupReloadOperator
    from spark_tables.operators.sql import SparkSqlJobOperator

    args = parse_args(argv)
    dims = LookupTable.in_catalog(name="bench_dims", table=TABLE, key=("id",))
    with DAG(dag_id=DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        tasks = []
        for task_id in task_order(args.rounds):
            if task_id == "make":
                sql = [
                    "CREATE DATABASE IF NOT EXISTS bench_lookup",
                    f"CREATE OR REPLACE TABLE {TABLE} USING delta AS SELECT id, concat('name ', id) AS name, "
                    f"id % 97 AS segment FROM range({args.rows})",
                ]
                tasks.append(SparkSqlJobOperator(task_id=task_id, sql=sql))
            elif task_id == "change":
                tasks.append(SparkSqlJobOperator(task_id=task_id, sql=f"UPDATE {TABLE} SET segment = -1 WHERE id = 7"))
            else:
                tasks.append(SparkLookupReloadOperator(task_id=task_id, lookup=dims))
        chain(*tasks)
    return dag


def snapshot_folders() -> list[str]:
    root = os.path.join(os.environ["AIRFLOW__SPARK_TABLES__HOME"], "lookup")
    return sorted(
        name for table in os.listdir(root) for name in os.listdir(os.path.join(root, table)) if name.startswith("v-")
    )


def main(argv: list[str]) -> bool:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    root = fresh_airflow("spark_tables_bench_lookup_", None, AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE="off")
    os.environ["AIRFLOW_CONN_SPARK_TABLES_DEFAULT"] = json.dumps(CATALOG_CONNECTION)
    with working_in(root, args.keep):
        write_dag_file(__file__, argv)
        dag_run, wall_seconds, notes = run_dag(benchmark_dag(argv))
        instances = {ti.task_id: ti for ti in dag_run.get_task_instances()}
        failed = sorted(task for task, ti in instances.items() if ti.state != "success")
        if failed:
            print(f"tasks that did not succeed: {failed}", file=sys.stderr)
            return False
        seconds = {task: (ti.end_date - ti.start_date).total_seconds() for task, ti in instances.items()}
        xcoms = {task: ti.xcom_pull(task_ids=task) for task, ti in instances.items()}
        folders = snapshot_folders()
    return report(args, seconds, xcoms, folders, wall_seconds, notes, command)


def report(
    args: argparse.Namespace,
    seconds: dict[str, float],
    xcoms: dict[str, Any],
    folders: list[str],
    wall_seconds: float,
    notes: list[str],
    command: str,
) -> bool:
    copies = [task for task in seconds if task.startswith("copy_")]
    unchanged = [task for task in seconds if task.startswith("unchanged_")]
    problems = []
    copied = [xcoms[task]["snapshot"]["table_version"]["number"] for task in sorted(copies)]
    for task in copies:
        x = xcoms[task]
        if not x["loaded"] or not x["application_id"]:
            problems.append(f"{task} did not copy the table with a Spark job: {json.dumps(x)[:300]}")
    if copied != sorted(set(copied)):
        problems.append(f"the copies copied versions {copied}: the second is not newer (the change made none?)")
    for task in unchanged:
        x = xcoms[task]
        if not x["unchanged"] or x["loaded"] or x["application_id"] is not None or x["attempts"] != 0:
            problems.append(f"{task} was not an unchanged reload without a Spark job: {json.dumps(x)[:300]}")
    loads = {xcoms[task]["loads"] for task in unchanged}
    if len(folders) != len(copies) or loads != {1, 2}:
        problems.append(f"snapshots written: {folders}; loads counted by the unchanged reloads: {sorted(loads)}")
    copy_seconds = [seconds[task] for task in copies]
    unchanged_seconds = [seconds[task] for task in unchanged]
    print(
        f"\n{len(copies)} copies (of versions {copied}) and {len(unchanged)} unchanged reloads of a "
        f"{args.rows:,}-row Delta table"
    )
    print(f"{'task':<16}{'seconds':>9}  what")
    for task in task_order(args.rounds):
        x = xcoms[task]
        what = "SQL job" if task in ("make", "change") else ("copied" if x["loaded"] else "unchanged, no Spark job")
        print(f"{task:<16}{fmt(seconds[task]):>9}  {what}")
    slowest = max(unchanged_seconds)
    median_copy = statistics.median(copy_seconds)
    print(
        f"\nunchanged reload: median {statistics.median(unchanged_seconds):.3f} s, slowest {slowest:.3f} s; "
        f"a copy: median {median_copy:.2f} s ({median_copy / statistics.median(unchanged_seconds):.0f}x); "
        f"snapshots written {len(folders)} (the copies'); DAG run {wall_seconds:.1f} s"
    )
    for note in notes:
        print(note)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    met = not problems and slowest < TARGET_SECONDS
    print(
        f"target: every unchanged reload under {TARGET_SECONDS:.1f} s of work, no snapshot written: "
        f"{'met' if met else 'MISSED'}"
    )
    print(f"reproduce: {command}")
    return met


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
