"""What every benchmark here shares: a fresh Airflow of its own under /tmp, a DAG file in its DAGs folder run by
``dag.test()`` through real spark-submit, a local Spark session in the benchmark's own process, a Spark Connect
server or a Kafka broker of the run's own, and a note of what else was running on the machine."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
VENV_BIN = os.path.dirname(sys.executable)  # not resolved: the venv's bin, where airflow and spark-submit are


def local_spark(app_name: str, root: str, **confs: str) -> Any:
    """A local[2] SparkSession in this process, its warehouse under ``root``, no UI, warnings only, Python workers
    on this interpreter (which has spark_tables), with ``confs`` besides."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.sql.warehouse.dir", os.path.join(root, "warehouse"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.log.level", "WARN")
        .config("spark.pyspark.python", sys.executable)
    )
    for name, value in confs.items():
        builder = builder.config(name, value)
    return builder.getOrCreate()


def reproduce_command(script: str, argv: list[str]) -> str:
    """Print how to run this benchmark again, from this folder; return the command, to print again at the end."""
    command = shlex.join([sys.executable, os.path.abspath(script), *argv])
    print(f"reproduce: cd {shlex.quote(os.getcwd())} && {command}", flush=True)
    return command


def fresh_airflow(prefix: str, airflow_home: str | None = None, **settings: str) -> str:
    """A new folder under /tmp with AIRFLOW_HOME (SQLite), an empty DAGs folder and the provider's home, and the
    environment pointing there (``settings``: more variables); set before Airflow is imported. Its path."""
    if "airflow" in sys.modules:
        raise RuntimeError("airflow was imported before its environment was set")
    root = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    home = os.path.abspath(airflow_home) if airflow_home else os.path.join(root, "airflow")
    for folder in (home, os.path.join(root, "dags"), os.path.join(root, "spark_tables")):
        os.makedirs(folder, exist_ok=True)
    os.environ.update(
        {
            "AIRFLOW_HOME": home,
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:///" + os.path.join(home, "airflow.db"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": os.path.join(root, "dags"),
            "AIRFLOW__SPARK_TABLES__HOME": os.path.join(root, "spark_tables"),
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
            # The same PATH for every task, with this venv's spark-submit first.
            "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
            **settings,
        }
    )
    # Whatever would send the provider elsewhere than the embedded catalog under this home.
    for name in ("AIRFLOW_CONN_SPARK_TABLES_DEFAULT", "AIRFLOW__SPARK_TABLES__EXCHANGE_URI"):
        os.environ.pop(name, None)
    check_tools()
    migrate_db()
    return root


def check_tools() -> None:
    spark_submit = shutil.which("spark-submit")
    if spark_submit != os.path.join(VENV_BIN, "spark-submit"):
        raise SystemExit(f"spark-submit on PATH is {spark_submit!r}, not the venv's: run with the venv's python")
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK)) and not shutil.which("java"):
        raise SystemExit("java not found: install Java 17 or set JAVA_HOME")


def migrate_db() -> None:
    result = subprocess.run(
        [os.path.join(VENV_BIN, "airflow"), "db", "migrate"], capture_output=True, text=True, check=False
    )
    if result.returncode:
        sys.stderr.write(result.stdout + result.stderr)
        raise SystemExit(f"airflow db migrate failed with exit code {result.returncode}")


DAG_FILE = """\"\"\"The Airflow DAG of bench/{module}.py, written into this run's DAGs folder by bench/harness.py.\"\"\"

import sys

sys.path.insert(0, {bench!r})

from {module} import benchmark_dag

dag = benchmark_dag({argv!r})
"""


def write_dag_file(script: str, argv: list[str]) -> None:
    """Put the benchmark's DAG in the DAGs folder, built by ``benchmark_dag(argv)`` of ``script``, so that
    ``dag.test()`` finds it there as it finds a user's DAG (its docstring names Airflow and a DAG: Airflow's
    safe mode parses only files that mention both)."""
    module = os.path.splitext(os.path.basename(script))[0]
    path = os.path.join(os.environ["AIRFLOW__CORE__DAGS_FOLDER"], f"{module}_dag.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(DAG_FILE.format(module=module, bench=os.path.dirname(os.path.abspath(script)), argv=argv))


@contextlib.contextmanager
def working_in(root: str, keep: bool) -> Iterator[None]:
    """Work in ``root`` (whatever Spark or Derby drop in the working directory lands there); remove it after."""
    os.chdir(root)
    try:
        yield
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def run_dag(dag: Any) -> tuple[Any, float, list[str]]:
    """Run ``dag`` with ``dag.test()``, as a user would (its file in the DAGs folder: ``write_dag_file``): the DAG
    run, its wall seconds, notes on the machine."""
    notes = [machine_note("before", dag.dag_id)]
    started = time.monotonic()
    dag_run = dag.test()
    wall_seconds = time.monotonic() - started
    notes.append(machine_note("after", dag.dag_id))
    return dag_run, wall_seconds, notes


def other_spark_applications(mine: str) -> int:
    """Spark JVMs on this machine whose command line does not name ``mine`` (they share the cores)."""
    count = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().decode(errors="replace")
        except OSError:
            continue
        if "org.apache.spark.deploy.SparkSubmit" in cmdline and mine not in cmdline:
            count += 1
    return count


def machine_note(when: str, mine: str) -> str:
    return (
        f"load average {when}: {os.getloadavg()[0]:.2f}; other Spark applications running: "
        f"{other_spark_applications(mine)}"
    )


def med(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fmt(value: float | None) -> str:
    return "    -" if value is None else f"{value:6.2f}"


@contextlib.contextmanager
def connect_server(root: str) -> Iterator[str]:
    """A Spark Connect server of this venv's pyspark on loopback (``local[2]``, an in-memory catalog and a warehouse
    under ``root``), started as the demo starts its own (``scripts/connect_server.py``), listening before this yields
    its ``spark_connect`` connection (JSON, as ``AIRFLOW_CONN_...`` takes it); stopped after."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
    import connect_server as server  # scripts/connect_server.py

    catalog = {
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": os.path.join(root, "server_warehouse"),
    }
    connection = server.start(Path(root) / "connect_server.log", catalog)
    try:
        yield connection
    finally:
        server.stop()


@contextlib.contextmanager
def kafka_broker(root: str) -> Iterator[str]:
    """The broker's host:port: ``SPARK_TABLES_TEST_KAFKA``'s, or one of this run's, stopped at the end."""
    given = os.environ.get("SPARK_TABLES_TEST_KAFKA")
    if given:
        yield given
        return
    spec = importlib.util.spec_from_file_location("kafka_broker", REPOSITORY / "scripts" / "kafka_broker.py")
    broker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(broker)
    jars = Path(os.environ.get("KAFKA_BROKER_JARS", Path(sys.prefix) / "share" / "spark-tables" / "kafka-broker"))
    home = Path(root) / "kafka"
    address = broker.start(home, jars)
    try:
        yield address
    finally:
        broker.stop(home)


def new_topic(servers: str, label: str, *, compacted: bool = False) -> str:
    """A new topic of one partition on the broker at ``servers``, compacted if told."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-{label}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": servers})  # kept until the topic is made: its futures need it
    config = {"cleanup.policy": "compact"} if compacted else {}
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        future.result(30)
    return topic
