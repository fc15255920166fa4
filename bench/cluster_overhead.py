"""Per-task overhead of a Spark standalone cluster (a master and two workers of 1 core and 1 GiB, on loopback) over
local Spark, and of ``SparkSqlJobOperator`` on that cluster over Airflow's plain ``SparkSubmitOperator`` there.

Three sides run the same small Spark SQL statements (``bench/overhead.py``'s: catalog work, a small overwrite,
one query over ``range(--rows)``) with the same Spark conf (the provider's embedded catalog, ``spark.log.level=WARN``,
this Python for PySpark), through real ``spark-submit`` and real Airflow, one task at a time by ``dag.test()``:

- ``local``: ``SparkSqlJobOperator`` on ``local[*]``, the provider's default;
- ``cluster``: ``SparkSqlJobOperator`` on the cluster's master, client deploy mode;
- ``plain``: ``SparkSubmitOperator`` on the same master with a plain PySpark application of the same statements.

Each round runs the three in a rotated order (``bench/overhead.py`` says why); a ``warmup`` task (plain, on the
cluster, not measured) comes first. The cluster is ``tests/integration/spark_cluster.py``'s, sized by
``tests/integration/as_deployed.py`` as the tests' and docker/'s are: an application gets one executor of one core
(the master's ``spark.deploy.defaultCores``), so the job is small enough for its overhead to show.

Each task's time is its task instance's ``end_date - start_date``; the driver's own clocks (session start, SQL
work) split it. No target: this is the baseline of a session mode that would keep drivers and executors up.

Usage::

    .venv/bin/python bench/cluster_overhead.py [--rounds 3] [--rows 1000000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from typing import Any

from harness import reproduce_command, run_dag, working_in, write_dag_file
from overhead import (
    Folders,
    TaskTiming,
    collect,
    expected_rows,
    folders_from_environment,
    median_interval,
    prepare_environment,
    print_time_split,
    round_order,
    rounds_dag,
    task_kinds,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAG_ID = "spark_tables_cluster_overhead"
SIDES = ("plain", "local", "cluster")
#: The connections of the sides: ``spark_local`` and ``spark_cluster`` (the plain side's too).
LOCAL, CLUSTER = "spark_local", "spark_cluster"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of plain, local and cluster (default 3)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of range(N) each job reads")
    parser.add_argument("--airflow-home", help="AIRFLOW_HOME to use (default: a fresh folder under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < 1:
        parser.error("--rounds and --rows must be at least 1")
    return args


def benchmark_dag(argv: list[str]) -> Any:
    """The DAG of this benchmark, for its DAG file (``harness.write_dag_file``)."""
    return build_dag(parse_args(argv), folders_from_environment())


def build_dag(args: argparse.Namespace, folders: Folders) -> Any:
    plain, ours = task_kinds(args, folders, DAG_ID)
    makers = {
        "plain": lambda task_id: plain(task_id, CLUSTER),
        "local": lambda task_id: ours(task_id, LOCAL, count_rows=False),
        "cluster": lambda task_id: ours(task_id, CLUSTER, count_rows=False),
    }
    return rounds_dag(DAG_ID, makers, args.rounds)


def executors_on_workers(cluster: Any, dag_run: Any) -> None:
    """Every cluster task's application ran its executors on the workers (else it was not the cluster measured)."""
    for ti in dag_run.get_task_instances():
        if ti.task_id.startswith("cluster_"):
            application_id = ti.xcom_pull(task_ids=ti.task_id)["application_id"]
            if not cluster.executors(application_id):
                raise SystemExit(f"{ti.task_id}: application {application_id} had no executor on the workers")


def report(args: argparse.Namespace, timings: dict[str, TaskTiming], wall_seconds: float, notes: list[str]) -> None:
    expected = expected_rows(args.rows)
    for timing in timings.values():
        if timing.rows != expected:
            raise SystemExit(f"{timing.task_id} returned {timing.rows}, expected {expected}")
    rounds = range(1, args.rounds + 1)
    sides = {side: [timings[f"{side}_{n}"] for n in rounds] for side in SIDES}
    pairs = {"cluster - local": ("cluster", "local"), "cluster - plain": ("cluster", "plain")}
    differences = {
        label: [a.seconds - b.seconds for a, b in zip(sides[first], sides[second], strict=True)]
        for label, (first, second) in pairs.items()
    }

    print()
    print("=" * 78)
    print(f"2-worker standalone cluster vs local[*], and ours vs SparkSubmitOperator there: {args.rounds} rounds, "
          f"range({args.rows:,})")  # fmt: skip
    print("=" * 78)
    print("task durations (task instance end_date - start_date), seconds")
    print(f"{'round':>5}  {'plain':>7}  {'local':>7}  {'cluster':>7}  {'clu.-local':>10}  {'clu.-plain':>10}  order")
    for index, number in enumerate(rounds):
        p, lo, c = (sides[side][index].seconds for side in SIDES)
        print(
            f"{number:>5}  {p:7.2f}  {lo:7.2f}  {c:7.2f}  {differences['cluster - local'][index]:+10.2f}  "
            f"{differences['cluster - plain'][index]:+10.2f}  {' > '.join(round_order(number, SIDES))}"
        )
    print(f"warmup (plain on the cluster, not counted): {timings['warmup'].seconds:.2f} s")
    print()
    for label, (first, second) in pairs.items():
        overhead = statistics.median(differences[label])
        base = statistics.median(t.seconds for t in sides[second])
        low, high = median_interval(differences[label])
        print(
            f"{label:<16} median {overhead:+.2f} s ({overhead / base:.2f}x of {second}'s {base:.2f} s added; "
            f"ratio {statistics.median(t.seconds for t in sides[first]) / base:.2f}; 95 % interval {low:+.2f} .. "
            f"{high:+.2f} s)"
        )
    print()
    print("where the time goes (medians, seconds): driver session start (executors registering included on the")
    print("cluster), SQL work, and the rest (JVM and spark-submit start/stop, Python start, Airflow and operator work)")
    print_time_split(sides)
    print()
    measured = sum(t.seconds for t in timings.values())
    print(f"dag.test wall time {wall_seconds:.2f} s for {len(timings)} tasks ({measured:.2f} s inside tasks)")
    for note in notes:
        print(note)
    print("=" * 78)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    folders = prepare_environment(args)
    sys.path.insert(0, REPO)
    from pathlib import Path

    from tests.integration.spark_cluster import running_spark_cluster

    print(f"working folder: {folders.root} (AIRFLOW_HOME {folders.airflow_home})", flush=True)
    with working_in(folders.root, args.keep):
        os.makedirs(os.path.join(folders.root, "cluster"))
        with running_spark_cluster(Path(folders.root, "cluster")) as cluster:
            os.environ["AIRFLOW_CONN_SPARK_LOCAL"] = json.dumps({"conn_type": "spark", "host": "local[*]"})
            os.environ["AIRFLOW_CONN_SPARK_CLUSTER"] = json.dumps(
                {"conn_type": "spark", "host": cluster.master_url, "extra": {"deploy-mode": "client"}}
            )
            os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
            print(f"cluster: {cluster.master_url}, UI {cluster.ui_url}", flush=True)
            write_dag_file(__file__, argv)
            dag_run, wall_seconds, notes = run_dag(benchmark_dag(argv))
            timings = collect(dag_run, folders)
            executors_on_workers(cluster, dag_run)
        report(args, timings, wall_seconds, notes)
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
