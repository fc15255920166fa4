"""Per-task overhead of ``SparkSqlJobOperator`` over Airflow's plain ``SparkSubmitOperator``.

Both sides run the same Spark SQL statements with the same Spark conf (the provider's embedded Hive catalog
with its Derby metastore, ``spark.log.level=WARN``, this Python for PySpark), the same ``spark_default``
connection (``local[*]``) and the same PATH, through real ``spark-submit`` and real Airflow. Ours runs twice
a round: as written (``ours``, counting the written table for XCom's ``row_counts``) and with
``count_rows=False`` (``uncounted``), which is ours doing what the plain job does. One DAG of rounds runs one
task at a time by ``dag.test()``, each round's three tasks in a rotated order (``plain_1 >> ours_1 >>
uncounted_1 >> ours_2 >> uncounted_2 >> plain_2 >> uncounted_3 >> plain_3 >> ours_3 ...``): this machine's
speed drifts over a run (the plain tasks alone by 40 % over nine rounds once), and a side always later in its
round would carry that drift as overhead. A ``warmup`` task (plain, not measured) comes first: it creates the
Derby metastore and the table and pays the first task's one-off Airflow start-up.

Each task's time is its task instance's ``end_date - start_date``. The overhead of a round is
``ours - plain``; the verdict uses the median over rounds against the target
``max(5 % of the median plain time, 0.5 s)``.

Everything lives in a fresh folder under /tmp (AIRFLOW_HOME with its own SQLite metadata DB, an empty DAGs
folder, the spark_tables home with its own Derby metastore), so runs of other people are not touched.

Usage::

    .venv/bin/python bench/overhead.py [--rounds 3] [--rows 20000000] [--airflow-home DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from harness import fmt, fresh_airflow, med, reproduce_command, run_dag, working_in, write_dag_file

DAG_ID = "spark_tables_overhead"
DATABASE = "bench_overhead"
TABLE = f"{DATABASE}.buckets"
TARGET_FRACTION = 0.05
TARGET_SECONDS = 0.5

#: The plain side's Spark application: the same statements, run as the provider's driver runs them (commands
#: where they stand, the last statement's query collected), timed the same way as the provider's driver
#: (session clock from after ``import pyspark`` to ``getOrCreate()``; work clock over the statements).
PLAIN_JOB = '''\
"""Plain PySpark job for bench/overhead.py: spark-submit plain_job.py '<statements JSON>' <timing file>."""

import json
import sys
import time

from pyspark.sql import SparkSession

started = time.monotonic()
spark = SparkSession.builder.getOrCreate()
session_seconds = time.monotonic() - started
work_started = time.monotonic()
frame = None
for statement in json.loads(sys.argv[1]):
    frame = spark.sql(statement)
rows = [list(row) for row in frame.collect()]
work_seconds = time.monotonic() - work_started
print("plain job rows:", rows, flush=True)
with open(sys.argv[2], "w", encoding="utf-8") as handle:
    json.dump({"rows": rows, "session_seconds": session_seconds, "work_seconds": work_seconds}, handle)
spark.stop()
'''


@dataclass
class Folders:
    """Where this run keeps everything; ``root`` is removed at the end unless ``--keep``."""

    root: str
    airflow_home: str
    dags: str
    spark_tables_home: str
    plain_job: str
    plain_timings: str


@dataclass
class TaskTiming:
    task_id: str
    seconds: float
    session_seconds: float | None = None
    work_seconds: float | None = None
    rows: list[list[Any]] = field(default_factory=list)

    @property
    def outside_driver_seconds(self) -> float | None:
        """JVM and spark-submit start and stop, plus Airflow's and the operator's own work."""
        if self.session_seconds is None or self.work_seconds is None:
            return None
        return self.seconds - self.session_seconds - self.work_seconds


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of plain, ours and uncounted to run (default 3)")
    parser.add_argument("--rows", type=int, default=20_000_000, help="rows of range(N) each job reads")
    parser.add_argument("--airflow-home", help="AIRFLOW_HOME to use (default: a fresh folder under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder for inspection")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.rows < 1:
        parser.error("--rounds and --rows must be at least 1")
    return args


def statements(rows: int) -> list[str]:
    """The Spark application both sides run: catalog work, a small overwrite, then one query."""
    return [
        f"CREATE DATABASE IF NOT EXISTS {DATABASE}",
        f"CREATE TABLE IF NOT EXISTS {TABLE} (bucket BIGINT, n BIGINT, total BIGINT) USING parquet",
        f"INSERT OVERWRITE {TABLE} SELECT id % 7 AS bucket, count(*) AS n, sum(id) AS total "
        f"FROM range({rows}) GROUP BY id % 7",
        f"SELECT count(*), sum(id % 7) FROM range({rows})",
    ]


def expected_rows(rows: int) -> list[list[int]]:
    full_weeks, rest = divmod(rows, 7)
    return [[rows, full_weeks * 21 + sum(range(rest))]]


def prepare_environment(args: argparse.Namespace) -> Folders:
    """Fresh folders and every environment variable Airflow and the provider read, before Airflow is imported.

    The drivers' class-data archive is off: the plain side has none, and this compares like with like
    (``bench/class_archive.py`` measures what the archive saves).
    """
    fresh_airflow("spark_tables_bench_", args.airflow_home, AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE="off")
    folders = folders_from_environment()
    os.makedirs(folders.plain_timings, exist_ok=True)
    with open(folders.plain_job, "w", encoding="utf-8") as handle:
        handle.write(PLAIN_JOB)
    return folders


def folders_from_environment() -> Folders:
    """The folders of this run, from the environment ``fresh_airflow`` set (the DAG file is parsed with it)."""
    root = os.path.dirname(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    return Folders(
        root=root,
        airflow_home=os.environ["AIRFLOW_HOME"],
        dags=os.environ["AIRFLOW__CORE__DAGS_FOLDER"],
        spark_tables_home=os.environ["AIRFLOW__SPARK_TABLES__HOME"],
        plain_job=os.path.join(root, "plain_job.py"),
        plain_timings=os.path.join(root, "plain_timings"),
    )


def benchmark_dag(argv: list[str]) -> Any:
    """The DAG of this benchmark, for its DAG file (``harness.write_dag_file``)."""
    return build_dag(parse_args(argv), folders_from_environment())


def spark_confs(spark_tables_home: str, table_formats: tuple[str, ...] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """(plain conf, ours conf): ours gets the catalog settings from the provider (the embedded catalog of
    ``spark_tables_home``, loading ``table_formats``), so they are not repeated.

    Checked to be the very conf the provider's hook submits, so both applications run with the same settings.
    """
    from spark_tables.core.catalog_config import EmbeddedCatalog
    from spark_tables.hooks.spark_job import _spark_conf
    from spark_tables.utils import settings

    if settings.home() != os.path.abspath(spark_tables_home):
        raise RuntimeError(f"the provider's home is {settings.home()}, not {spark_tables_home}")
    catalog = EmbeddedCatalog(spark_tables_home, table_formats=table_formats)
    shared = {
        "spark.log.level": "WARN",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
    }
    plain = {**catalog.spark_conf(), **shared}
    ours = dict(shared)
    if _spark_conf(catalog, ours) != plain:
        raise RuntimeError(f"the provider would submit {_spark_conf(catalog, ours)}, not {plain}")
    return plain, ours


def build_dag(args: argparse.Namespace, folders: Folders) -> Any:
    plain, ours = task_kinds(args, folders, DAG_ID)
    makers = {
        "plain": lambda task_id: plain(task_id, "spark_default"),
        "ours": lambda task_id: ours(task_id, "spark_default"),
        "uncounted": lambda task_id: ours(task_id, "spark_default", count_rows=False),
    }
    return rounds_dag(DAG_ID, makers, args.rounds)


def task_kinds(args: argparse.Namespace, folders: Folders, dag_id: str) -> tuple[Callable[..., Any], ...]:
    """The two kinds of task the sides are made of, with the same statements and conf: ``plain(task_id, conn_id)``,
    the plain application through ``SparkSubmitOperator``, and ``ours(task_id, conn_id, count_rows=True)``."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from spark_tables.operators.sql import SparkSqlJobOperator

    sql = statements(args.rows)
    plain_conf, ours_conf = spark_confs(folders.spark_tables_home)

    def plain(task_id: str, conn_id: str) -> SparkSubmitOperator:
        return SparkSubmitOperator(
            task_id=task_id,
            conn_id=conn_id,
            application=folders.plain_job,
            application_args=[json.dumps(sql), os.path.join(folders.plain_timings, f"{task_id}.json")],
            conf=plain_conf,
            name=f"{dag_id}.{task_id}",
        )

    def ours(task_id: str, conn_id: str, count_rows: bool = True) -> SparkSqlJobOperator:
        return SparkSqlJobOperator(task_id=task_id, conn_id=conn_id, sql=sql, conf=ours_conf, count_rows=count_rows)

    return plain, ours


def rounds_dag(dag_id: str, makers: dict[str, Callable[[str], Any]], rounds: int) -> Any:
    """One task at a time: a ``warmup`` of the first side (not measured), then ``rounds`` rounds of every side,
    each round in the order ``round_order`` gives; a task of side ``s`` in round ``n`` is ``s_n``."""
    from airflow.sdk import DAG, chain

    sides = tuple(makers)
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        default_args={"retries": 0},
        tags=["benchmark"],
    ) as dag:
        tasks: list[Any] = [makers[sides[0]]("warmup")]
        for number in range(1, rounds + 1):
            tasks += [makers[side](f"{side}_{number}") for side in round_order(number, sides)]
        chain(*tasks)
    return dag


SIDES = ("plain", "ours", "uncounted")


def round_order(number: int, sides: tuple[str, ...] = SIDES) -> tuple[str, ...]:
    """The order of round ``number``'s tasks: ``sides`` rotated, so each side is first, second, ... in turn."""
    shift = (number - 1) % len(sides)
    return sides[shift:] + sides[:shift]


def collect(dag_run: Any, folders: Folders) -> dict[str, TaskTiming]:
    """Every task's timing; raises SystemExit naming the tasks that did not succeed."""
    task_instances = {ti.task_id: ti for ti in dag_run.get_task_instances()}
    failed = {task_id: str(ti.state) for task_id, ti in task_instances.items() if ti.state != "success"}
    if failed or dag_run.state != "success":
        raise SystemExit(f"benchmark DAG run {dag_run.state}: tasks not successful: {failed}")
    timings: dict[str, TaskTiming] = {}
    for task_id, ti in task_instances.items():
        timing = TaskTiming(task_id, (ti.end_date - ti.start_date).total_seconds())
        if not task_id.startswith(("plain_", "warmup")):
            xcom = ti.xcom_pull(task_ids=task_id)
            timing.session_seconds, timing.work_seconds = xcom["session_seconds"], xcom["work_seconds"]
            timing.rows = xcom["rows"]
        else:
            with open(os.path.join(folders.plain_timings, f"{task_id}.json"), encoding="utf-8") as handle:
                reported = json.load(handle)
            timing.session_seconds, timing.work_seconds = reported["session_seconds"], reported["work_seconds"]
            timing.rows = reported["rows"]
        timings[task_id] = timing
    return timings


def print_time_split(sides: dict[str, list[TaskTiming]]) -> None:
    """Each side's median task time, and its driver's session start, work and the rest."""
    print(f"{'':10}{'total':>7}{'session':>9}{'work':>7}{'rest':>7}")
    for side, timings in sides.items():
        print(
            f"{side:10}{fmt(med([t.seconds for t in timings])):>7}"
            f"{fmt(med([t.session_seconds for t in timings])):>9}"
            f"{fmt(med([t.work_seconds for t in timings])):>7}"
            f"{fmt(med([t.outside_driver_seconds for t in timings])):>7}"
        )


def median_interval(values: list[float], resamples: int = 5000) -> tuple[float, float]:
    """A 95 % bootstrap interval of the median of ``values`` (a fixed seed: the same rounds give the same interval)."""
    draw = random.Random(0)
    medians = sorted(statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def report(args: argparse.Namespace, timings: dict[str, TaskTiming], wall_seconds: float, notes: list[str]) -> bool:
    """Print the results; return whether ours as written meets the target (the exit code does not depend on it)."""
    expected = expected_rows(args.rows)
    for timing in timings.values():
        if timing.rows != expected:
            raise SystemExit(f"{timing.task_id} returned {timing.rows}, expected {expected}")

    rounds = range(1, args.rounds + 1)
    sides = {side: [timings[f"{side}_{n}"] for n in rounds] for side in SIDES}
    median_plain = statistics.median(t.seconds for t in sides["plain"])
    threshold = max(TARGET_FRACTION * median_plain, TARGET_SECONDS)
    differences = {
        side: [o.seconds - p.seconds for p, o in zip(sides["plain"], sides[side], strict=True)]
        for side in ("ours", "uncounted")
    }

    print()
    print("=" * 78)
    print(f"SparkSqlJobOperator vs SparkSubmitOperator: {args.rounds} rounds, range({args.rows:,})")
    print("=" * 78)
    print("task durations (task instance end_date - start_date), seconds; uncounted = ours with count_rows=False")
    print(f"{'round':>5}  {'plain':>7}  {'ours':>7}  {'uncounted':>9}  {'ours-plain':>10}  {'unc.-plain':>10}  order")
    for index, number in enumerate(rounds):
        p, o, u = (sides[side][index].seconds for side in SIDES)
        print(
            f"{number:>5}  {p:7.2f}  {o:7.2f}  {u:9.2f}  {differences['ours'][index]:+10.2f}  "
            f"{differences['uncounted'][index]:+10.2f}  {' > '.join(round_order(number))}"
        )
    print(f"warmup (plain, not counted): {timings['warmup'].seconds:.2f} s")
    print()
    print(f"median plain      {median_plain:7.2f} s")
    print(f"target            < {threshold:.2f} s  (max(5 % of {median_plain:.2f} s, {TARGET_SECONDS} s))")
    verdicts = {}
    for side, label in (("ours", "ours"), ("uncounted", "ours, count_rows=False")):
        overhead = statistics.median(differences[side])
        verdicts[side] = overhead < threshold
        low, high = median_interval(differences[side])
        print(
            f"{label:<23} median overhead {overhead:+.2f} s ({100 * overhead / median_plain:+.1f} % of plain; "
            f"95 % interval {low:+.2f} .. {high:+.2f} s; per-round range {min(differences[side]):+.2f} .. "
            f"{max(differences[side]):+.2f} s): {'MEETS' if verdicts[side] else 'MISSES'} the target"
        )
    spread = max(t.seconds for t in sides["plain"]) - min(t.seconds for t in sides["plain"])
    if spread > threshold:
        print(f"caution           plain times alone spread over {spread:.2f} s, more than the target: noisy run")
    print()
    print("where the time goes (medians, seconds): driver session start, SQL work, and the rest")
    print("(rest = JVM and spark-submit start/stop, Python start, Airflow task and operator work;")
    print(" ours' work also includes counting each written table for its XCom row_counts, which the others skip)")
    print_time_split(sides)
    print()
    measured = sum(t.seconds for t in timings.values())
    print(
        f"dag.test wall time {wall_seconds:.2f} s for {len(timings)} tasks ({measured:.2f} s inside tasks, "
        f"{wall_seconds - measured:.2f} s of dag.test scheduling between them)"
    )
    for note in notes:
        print(note)
    print("=" * 78)
    return verdicts["ours"]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = reproduce_command(__file__, argv)
    folders = prepare_environment(args)
    print(f"working folder: {folders.root} (AIRFLOW_HOME {folders.airflow_home})", flush=True)
    with working_in(folders.root, args.keep):
        write_dag_file(__file__, argv)
        dag_run, wall_seconds, notes = run_dag(benchmark_dag(argv))
        report(args, collect(dag_run, folders), wall_seconds, notes)
        print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
