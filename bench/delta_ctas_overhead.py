"""Per-task overhead of a Delta Lake CTAS through ``SparkCtasOperator`` over the same statement through Airflow's
plain ``SparkSubmitOperator``.

Both sides run ``CREATE TABLE bench_delta.<task> USING delta AS SELECT ...`` over ``range(N)`` with the same Spark
conf and jars (the provider's embedded catalog, its connection loading Delta Lake: Delta's jars with ``--jars``, its
SQL extensions and session catalog as conf), the same ``spark_default`` connection (``local[*]``) and the same PATH,
through real ``spark-submit`` and real Airflow. Ours does what FLIP-218 asks besides: it undoes what earlier tries
left, checks the name, writes its marks in the commit, and reads the commit's metrics from the table's history for
XCom. Each task makes a table of its own. One DAG of rounds runs one task at a time by ``dag.test()``, each round's
two tasks in a rotated order (``plain_1 >> ours_1 >> ours_2 >> plain_2 ...``), after a ``warmup`` task (plain, not
measured) that creates the Derby metastore and the database.

Each task's time is its task instance's ``end_date - start_date``; the overhead of a round is ``ours - plain``, and
the verdict takes the median over rounds against the issue's target ``max(5 % of the median plain time, 0.5 s)``.

Usage::

    .venv/bin/python bench/delta_ctas_overhead.py [--rounds 9] [--rows 20000000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

from harness import fmt, fresh_airflow, med, reproduce_command, run_dag, working_in, write_dag_file
from overhead import (
    PLAIN_JOB,
    TARGET_FRACTION,
    TARGET_SECONDS,
    median_interval,
    round_order,
    rounds_dag,
    spark_confs,
)

DAG_ID = "spark_tables_delta_ctas_overhead"
DATABASE = "bench_delta"
SIDES = ("plain", "ours")
#: The embedded catalog of this run's home, loading Delta Lake: the provider's default catalog connection.
CATALOG_CONNECTION = {"conn_type": "spark_tables", "extra": {"table-formats": ["delta"]}}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds of plain and ours to run (default 9)")
    parser.add_argument("--rows", type=int, default=20_000_000, help="rows of range(N) each CTAS writes")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < 1:
        parser.error("--rounds and --rows must be at least 1")
    return args


def ctas(task_id: str, rows: int) -> str:
    return f"CREATE TABLE {DATABASE}.{task_id} USING delta AS SELECT id % 7 AS bucket, id FROM range({rows})"


def root() -> str:
    return os.path.dirname(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


def prepare_environment() -> None:
    """A fresh Airflow and provider home, the catalog connection loading Delta, the plain side's job file."""
    fresh_airflow("spark_tables_bench_delta_", None, AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE="off")
    os.environ["AIRFLOW_CONN_SPARK_TABLES_DEFAULT"] = json.dumps(CATALOG_CONNECTION)
    os.makedirs(os.path.join(root(), "plain_timings"), exist_ok=True)
    with open(os.path.join(root(), "plain_job.py"), "w", encoding="utf-8") as handle:
        handle.write(PLAIN_JOB)


def spark_settings() -> tuple[dict[str, str], dict[str, str], str]:
    """(plain conf, ours conf, jars) of the embedded catalog loading Delta, which the provider's default catalog
    connection gives ours (checked)."""
    from spark_tables.core.catalog_config import EmbeddedCatalog
    from spark_tables.hooks.catalog import SparkTablesCatalogHook

    catalog = EmbeddedCatalog(os.environ["AIRFLOW__SPARK_TABLES__HOME"], table_formats=("delta",))
    if SparkTablesCatalogHook().get_catalog() != catalog:
        raise RuntimeError(f"the provider's catalog is {SparkTablesCatalogHook().get_catalog()}, not {catalog}")
    plain, ours = spark_confs(catalog.home, catalog.table_formats)
    return plain, ours, ",".join(catalog.jars)


def benchmark_dag(argv: list[str]) -> Any:
    """The DAG of this benchmark, for its DAG file (``harness.write_dag_file``)."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from spark_tables.operators.ctas import SparkCtasOperator

    args = parse_args(argv)
    plain_conf, ours_conf, jars = spark_settings()

    def plain(task_id: str) -> SparkSubmitOperator:
        statements = [f"CREATE DATABASE IF NOT EXISTS {DATABASE}", ctas(task_id, args.rows)]
        return SparkSubmitOperator(
            task_id=task_id,
            conn_id="spark_default",
            application=os.path.join(root(), "plain_job.py"),
            application_args=[json.dumps(statements), os.path.join(root(), "plain_timings", f"{task_id}.json")],
            conf=plain_conf,
            jars=jars,
            name=f"{DAG_ID}.{task_id}",
        )

    def ours(task_id: str) -> SparkCtasOperator:
        return SparkCtasOperator(task_id=task_id, conn_id="spark_default", sql=ctas(task_id, args.rows), conf=ours_conf)

    return rounds_dag(DAG_ID, {"plain": plain, "ours": ours}, args.rounds)


def collect(dag_run: Any, rows: int) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """Every task's seconds, and its driver's session and work seconds; raises SystemExit naming the tasks that did
    not succeed, or an XCom that is wrong."""
    task_instances = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    failed = {task_id: str(ti.state) for task_id, ti in task_instances.items() if ti.state != "success"}
    if failed or dag_run.state != "success":
        raise SystemExit(f"benchmark DAG run {dag_run.state}: tasks not successful: {failed}")
    driver: dict[str, tuple[float, float]] = {}
    for task_id, ti in task_instances.items():
        if task_id.startswith("ours_"):
            xcom = ti.xcom_pull(task_ids=task_id)
            made = (xcom["format"], xcom["rows"], xcom["version"], xcom["atomicity"])
            if made != ("delta", rows, 0, "commit"):
                raise SystemExit(f"{task_id} reported {made}, not a Delta table of {rows} rows in commit 0")
        else:
            with open(os.path.join(root(), "plain_timings", f"{task_id}.json"), encoding="utf-8") as handle:
                xcom = json.load(handle)
        driver[task_id] = (xcom["session_seconds"], xcom["work_seconds"])
    seconds = {task_id: (ti.end_date - ti.start_date).total_seconds() for task_id, ti in task_instances.items()}
    return seconds, driver


def report(
    args: argparse.Namespace,
    seconds: dict[str, float],
    driver: dict[str, tuple[float, float]],
    wall_seconds: float,
    notes: list[str],
) -> None:
    rounds = range(1, args.rounds + 1)
    sides = {side: [seconds[f"{side}_{n}"] for n in rounds] for side in SIDES}
    median_plain = statistics.median(sides["plain"])
    threshold = max(TARGET_FRACTION * median_plain, TARGET_SECONDS)
    differences = [o - p for p, o in zip(sides["plain"], sides["ours"], strict=True)]
    overhead = statistics.median(differences)
    low, high = median_interval(differences)
    print()
    print("=" * 78)
    print(f"Delta CTAS: SparkCtasOperator vs SparkSubmitOperator, {args.rounds} rounds, range({args.rows:,})")
    print("=" * 78)
    print(f"{'round':>5}  {'plain':>7}  {'ours':>7}  {'ours-plain':>10}  order")
    for index, number in enumerate(rounds):
        plain, ours = sides["plain"][index], sides["ours"][index]
        order = " > ".join(round_order(number, SIDES))
        print(f"{number:>5}  {plain:7.2f}  {ours:7.2f}  {differences[index]:+10.2f}  {order}")
    print(f"warmup (plain, not counted): {seconds['warmup']:.2f} s")
    print(f"median plain {fmt(median_plain)} s, ours {fmt(med(sides['ours']))} s")
    print(f"target       < {threshold:.2f} s  (max(5 % of {median_plain:.2f} s, {TARGET_SECONDS} s))")
    verdict = "MEETS" if overhead < threshold else "MISSES"
    print(
        f"median overhead {overhead:+.2f} s ({100 * overhead / median_plain:+.1f} % of plain; 95 % interval "
        f"{low:+.2f} .. {high:+.2f} s; per-round range {min(differences):+.2f} .. {max(differences):+.2f} s): "
        f"{verdict} the target"
    )
    print("where the time goes (medians, seconds): driver session start, the job's work, and the rest (JVM and")
    print("spark-submit start and stop, Airflow's and the operator's work)")
    for side in SIDES:
        tasks = [f"{side}_{n}" for n in rounds]
        session = med([driver[task][0] for task in tasks])
        work = med([driver[task][1] for task in tasks])
        rest = med([seconds[task] - sum(driver[task]) for task in tasks])
        print(f"  {side:6} session {fmt(session)}  work {fmt(work)}  rest {fmt(rest)}")
    print(f"dag.test wall time {wall_seconds:.2f} s for {len(seconds)} tasks")
    for note in notes:
        print(note)
    print("=" * 78)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    prepare_environment()
    print(f"working folder: {root()}", flush=True)
    with working_in(root(), args.keep):
        write_dag_file(__file__, argv)
        dag_run, wall_seconds, notes = run_dag(benchmark_dag(argv))
        report(args, *collect(dag_run, args.rows), wall_seconds, notes)
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
