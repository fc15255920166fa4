"""Real Airflow, real spark-submit, real PostgreSQL: each scenario gets its own Airflow home and catalog."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from spark_tables.core.catalog_config import Catalog, EmbeddedCatalog, PostgresMetastore
from spark_tables.utils.class_archive import ClassArchive
from tests.conftest import for_the_group

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
READ_BACK_SCRIPT = Path(__file__).with_name("read_back.py")
#: DAGs of the scenarios the integration tests run.
SCENARIOS = Path(__file__).with_name("dags")
#: One class-data archive for every deployment's drivers: only the first driver of a test session writes it.
JVM_CLASS_ARCHIVE = REPO / ".spark_tables" / "jvm"
#: PostgreSQL for the metastore tests; scripts/test.sh starts it (as root) and creates spark_tables_test. The
#: password is libpq's to find (PGPASSWORD, or its password file, where scripts/test.sh keeps the one it set up), as
#: for every client but the metastore's: see ``pg_password``.
PG_HOST = os.environ.get("SPARK_TABLES_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("SPARK_TABLES_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("SPARK_TABLES_TEST_PG_USER", "postgres")
#: The PostgreSQL metastore's database, emptied when a test session starts: one per pytest-xdist worker.
PG_DATABASE = "spark_tables_test" + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""
)
#: The metadata database of the Airflow that runs its scheduler: PostgreSQL, as deployed (SQLite refuses a
#: write that meets another process's for longer than its busy timeout, and the API server then answers 500).
AIRFLOW_METADATA_DATABASE = PG_DATABASE.replace("spark_tables_test", "spark_tables_airflow", 1)
#: The metastore of the deployment on the Spark standalone cluster: its own, so its tables (the examples', by the
#: same names) never meet those of the local deployments.
CLUSTER_METASTORE_DATABASE = PG_DATABASE.replace("spark_tables_test", "spark_tables_cluster", 1)


#: The table formats every deployment's catalog loads: Delta Lake, as the scripts' catalog does (scripts/setup.sh's
#: ``AIRFLOW_CONN_SPARK_TABLES_DEFAULT``), since the examples make Delta tables.
TABLE_FORMATS = ("delta",)


def setup_catalog_connection() -> str:
    """The catalog connection scripts/setup.sh gives the scripts' Airflow unless one is set: the embedded catalog,
    loading Delta Lake (read from the script, so that the tests run the examples as the demo does)."""
    found = re.search(r"AIRFLOW_CONN_SPARK_TABLES_DEFAULT:-'([^']*)'", (REPO / "scripts" / "setup.sh").read_text())
    assert found is not None, "scripts/setup.sh no longer sets AIRFLOW_CONN_SPARK_TABLES_DEFAULT"
    return found.group(1)


@dataclass(frozen=True)
class Deployment:
    """An Airflow home with a migrated SQLite DB, and the catalog its tasks use."""

    home: Path
    catalog: Catalog
    env: dict[str, str]

    def airflow(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(VENV_BIN / "airflow"), *args], env=self.env, capture_output=True, text=True, check=False
        )

    def with_dags(self, folder: Path) -> Deployment:
        """The same deployment, reading its DAGs from another folder."""
        return Deployment(
            home=self.home, catalog=self.catalog, env={**self.env, "AIRFLOW__CORE__DAGS_FOLDER": str(folder)}
        )

    def xcom(self, dag_id: str, task_id: str) -> Any:
        import sqlite3

        with sqlite3.connect(self.home / "airflow.db") as db:
            row = db.execute(
                "SELECT value FROM xcom WHERE dag_id = ? AND task_id = ? AND key = 'return_value'",
                (dag_id, task_id),
            ).fetchone()
        assert row is not None, f"no XCom return_value for {dag_id}.{task_id}"
        return json.loads(row[0])

    def latest_xcoms(self, dag_id: str, key: str = "return_value") -> dict[str, Any]:
        """The XComs under ``key`` (the return values) of the DAG's latest run, by task."""
        import sqlite3

        with sqlite3.connect(self.home / "airflow.db") as db:
            [run_id] = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC", (dag_id,)).fetchone()
            rows = db.execute(
                "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = ?", (dag_id, run_id, key)
            ).fetchall()
        return {task: json.loads(value) for task, value in rows}

    def read_back(self, sql: str) -> list[list[Any]]:
        """Rows of ``sql`` read by a separate Spark application on the same catalog."""
        command = [str(VENV_BIN / "spark-submit"), "--master", "local[2]"]
        if self.catalog.driver_class_path:
            command += ["--driver-class-path", self.catalog.driver_class_path]
        if self.catalog.jars:
            command += ["--jars", ",".join(self.catalog.jars)]
        conf = {**self.catalog.spark_conf(), "spark.log.level": "WARN", "spark.pyspark.python": sys.executable}
        archive = ClassArchive(str(JVM_CLASS_ARCHIVE), self.catalog.driver_class_path)
        java_options = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{java_options} {archive.java_option(java_options)}".strip()
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        # The metastore's password, as the provider's driver gets it: never on a command line.
        env = {**self.env, "READ_BACK_SECRET_CONF": json.dumps(self.catalog.secret_conf())}
        done = subprocess.run(
            [*command, str(READ_BACK_SCRIPT), sql], env=env, capture_output=True, text=True, check=False
        )
        archive.keep()
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        marked = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
        return json.loads(marked[-1][len("ROWS ") :])


@dataclass(frozen=True)
class ExampleRun:
    """A finished run of an example DAG, however it ran (``airflow dags test``, or the scheduler and a Celery
    worker): its tasks' return values, their logs, and the deployment whose catalog and provider home it used."""

    deployment: Deployment
    xcoms: dict[str, Any]
    log: str

    @property
    def home(self) -> Path:
        """The provider's home (``[spark_tables] home``): the exchange, the cache and lookup roots, the embedded
        catalog's warehouse."""
        return Path(self.deployment.env["AIRFLOW__SPARK_TABLES__HOME"])


def dags_test(deployment: Deployment, dag_id: str, *args: str) -> ExampleRun:
    """One successful ``airflow dags test`` of ``dag_id`` (``args`` after it: a logical date, ``--conf ...``)."""
    done = deployment.airflow("dags", "test", dag_id, *args)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return ExampleRun(deployment, deployment.latest_xcoms(dag_id), done.stdout + done.stderr)


def _base_env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("AIRFLOW")}
    env.update(
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__CORE__XCOM_BACKEND="spark_tables.xcom.cache_registry.CacheRegistryXComBackend",
        AIRFLOW__SPARK_TABLES__HOME=str(home / "spark_tables"),
        AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE=str(JVM_CLASS_ARCHIVE),
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return env


def _migrated(home: Path, env: dict[str, str]) -> None:
    """Airflow's metadata DB for ``home``: a database server's migrated in place; a SQLite file (``home``'s
    ``airflow.db``, Airflow's default) copied from one that ``airflow db migrate`` made once in the folder beside
    ``home`` (once per test session and worker: a migration cost 4-5 s of CPU, for a file that is the same each
    time)."""
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in env:
        _migrate(env)
    else:
        shutil.copyfile(_sqlite_template(home.parent / "airflow-db-template"), home / "airflow.db")


@functools.cache
def _sqlite_template(folder: Path) -> Path:
    folder.mkdir()
    _migrate(_base_env(folder))
    return folder / "airflow.db"


def _migrate(env: dict[str, str]) -> None:
    done = subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.fixture(scope="session")
def metastore_database() -> str:
    """A PostgreSQL database with an empty public schema, so the metastore schema is created by the run."""
    return _empty_database(PG_DATABASE)


@functools.cache
def pg_password() -> str:
    """The password libpq logs the tests' user in with ("" for none), for the catalog connections: the Hive
    metastore's client takes its password from the connection alone, never from a password file."""
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres") as conn:
        return conn.info.password or ""


def _empty_database(name: str) -> str:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=name, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
    return name


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    """The embedded default, shared by the test files a worker runs: each leaves its tables in its catalog."""
    return embedded_deployment(tmp_path_factory.mktemp("airflow-embedded"))


def embedded_deployment(home: Path) -> Deployment:
    """An Airflow in ``home`` on the embedded default (a Derby metastore and a warehouse under the provider's home),
    its catalog connection the scripts' (``setup_catalog_connection``: loading Delta Lake)."""
    env = {**_base_env(home), "AIRFLOW_CONN_SPARK_TABLES_DEFAULT": setup_catalog_connection()}
    formats = tuple(json.loads(env["AIRFLOW_CONN_SPARK_TABLES_DEFAULT"])["extra"]["table-formats"])
    assert formats == TABLE_FORMATS
    _migrated(home, env)
    return Deployment(
        home=home, catalog=EmbeddedCatalog(home=str(home / "spark_tables"), table_formats=formats), env=env
    )


def postgres_deployment(
    home: Path, metastore_database: str, warehouse: Path | str, metadata_database: str | None = None
) -> Deployment:
    """An Airflow on the PostgreSQL metastore; its own metadata DB is SQLite unless ``metadata_database`` is named."""
    env = _base_env(home)
    if metadata_database:
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = (
            f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{_empty_database(metadata_database)}"
        )
    catalog = PostgresMetastore(
        host=PG_HOST,
        port=PG_PORT,
        user=PG_USER,
        password=pg_password(),
        database=metastore_database,
        warehouse=str(warehouse),
        table_formats=TABLE_FORMATS,
    )
    env["AIRFLOW_CONN_SPARK_TABLES_DEFAULT"] = json.dumps(
        {
            "conn_type": "spark_tables",
            "host": PG_HOST,
            "port": PG_PORT,
            "schema": metastore_database,
            "login": PG_USER,
            "password": catalog.password,
            "extra": {"warehouse": catalog.warehouse, "table-formats": list(TABLE_FORMATS)},
        }
    )
    _migrated(home, env)
    return Deployment(home=home, catalog=catalog, env=env)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory, metastore_database: str) -> Deployment:
    home = tmp_path_factory.mktemp("airflow-postgres")
    return postgres_deployment(home, metastore_database, home / "warehouse")


def demo_connection(database: str) -> str:
    """The examples' PostgreSQL connection (type postgres) as an Airflow connection URI, on ``database``."""
    return f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


#: The lookup example's PostgreSQL connection: its dimension table lives in the tests' spark_tables_test.
LOOKUP_DEMO_CONN = demo_connection("spark_tables_test")


def _examples_and_scenarios(home: Path) -> Path:
    """A DAGs folder in ``home`` of the example DAGs and the scenarios, for Airflow as deployed."""
    dags = home / "dags"
    dags.mkdir()
    (dags / "examples").symlink_to(REPO / "dags")
    (dags / "scenarios").symlink_to(SCENARIOS)
    return dags


@pytest.fixture(scope="session")
def airflow(tmp_path_factory: pytest.TempPathFactory, postgres: Deployment, connect_server: Any) -> Iterator[Any]:
    """Airflow as deployed (API server, scheduler, DAG processor, triggerer, a Celery worker; PostgreSQL metadata
    DB, Redis broker), one for the test session, on the PostgreSQL metastore: the example DAGs and the scenarios;
    ``spark_session`` is the Spark Connect server (the cached tables' single-flight scenarios run there).
    """
    from tests.integration.airflow_services import running_airflow

    assert isinstance(postgres.catalog, PostgresMetastore)
    home = tmp_path_factory.mktemp("airflow-scheduler")
    deployment = postgres_deployment(
        home, postgres.catalog.database, Path(postgres.catalog.warehouse), AIRFLOW_METADATA_DATABASE
    )
    env = {
        **deployment.env,
        "AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO": LOOKUP_DEMO_CONN,
        "AIRFLOW_CONN_SPARK_SESSION": json.dumps(connect_server.connection),
        # A consumer waiting for a cached table's copy wakes when the claim is released, not when it is time to ask
        # Airflow whether the computing task still runs (1 min by default, which a busy machine's writer outlasts):
        # none of this session's writers is lost, and the tests check that the waiters woke on the release.
        "AIRFLOW__SPARK_TABLES__CACHE_WAIT_CHECK_INTERVAL": "1 h",
    }
    deployment = dataclasses.replace(deployment, env=env)
    with for_the_group("airflow_services", running_airflow(deployment, _examples_and_scenarios(home))) as services:
        yield services


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone master and its workers on loopback, once per test session (per pytest-xdist worker)."""
    from tests.integration.spark_cluster import running_spark_cluster

    with for_the_group("spark_cluster", running_spark_cluster(tmp_path_factory.mktemp("spark-cluster"))) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def on_cluster(tmp_path_factory: pytest.TempPathFactory, spark_cluster: Any) -> Deployment:
    """An Airflow whose ``spark_default`` is the standalone cluster (client deploy mode), on a PostgreSQL metastore.

    Its ``[spark_tables] home`` (warehouse, cache root, lookup root, checkpoints, exchange) is the folder every
    worker sees, as an NFS mount would be on machines of their own.
    """
    home = tmp_path_factory.mktemp("airflow-cluster")
    database = _empty_database(CLUSTER_METASTORE_DATABASE)
    deployment = postgres_deployment(home, database, home / "spark_tables" / "warehouse")
    extra = {"deploy-mode": "client", "master-ui-url": spark_cluster.ui_url}
    connection = {"conn_type": "spark", "host": spark_cluster.master_url, "extra": extra}
    # The drivers listen on loopback too, where the executors reach them.
    env = {**deployment.env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(connection), "SPARK_LOCAL_IP": "127.0.0.1"}
    return dataclasses.replace(deployment, env=env)


@pytest.fixture(scope="session")
def cluster_airflow(
    tmp_path_factory: pytest.TempPathFactory, on_cluster: Deployment, spark_cluster: Any
) -> Iterator[Any]:
    """Airflow as deployed (``airflow_services``: API server, scheduler, DAG processor, triggerer, a Celery worker)
    whose Spark is the standalone cluster, on ``on_cluster``'s metastore and shared folder, once per test session:
    the example DAGs and the scenarios, their PostgreSQL tables in the cluster's metastore database. A lost worker is
    noticed after 30 s without heartbeats. The durable jobs' scenarios run per job on the cluster (connection
    ``spark_per_job``); ``spark_default`` is made through the REST API once the cluster's Spark Connect server runs
    (``cluster_session``)."""
    from tests.integration.airflow_services import running_airflow
    from tests.integration.test_plan import plan_demo_env

    assert isinstance(on_cluster.catalog, PostgresMetastore)
    home = tmp_path_factory.mktemp("airflow-on-cluster")
    catalog = on_cluster.catalog
    metadata = AIRFLOW_METADATA_DATABASE.replace("airflow", "cluster_airflow", 1)
    deployment = postgres_deployment(home, catalog.database, Path(catalog.warehouse), metadata)
    env = {
        **deployment.env,
        "AIRFLOW__SPARK_TABLES__HOME": on_cluster.env["AIRFLOW__SPARK_TABLES__HOME"],
        "AIRFLOW_CONN_SPARK_PER_JOB": on_cluster.env["AIRFLOW_CONN_SPARK_DEFAULT"],
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO": demo_connection(CLUSTER_METASTORE_DATABASE),
        **plan_demo_env(CLUSTER_METASTORE_DATABASE, home),
    }
    deployment = Deployment(home=home, catalog=catalog, env=env)
    with for_the_group("spark_cluster", running_airflow(deployment, _examples_and_scenarios(home))) as services:
        yield services


#: The metastore of session mode's Spark Connect server: its own, as the cluster's is.
SESSION_METASTORE_DATABASE = PG_DATABASE.replace("spark_tables_test", "spark_tables_session", 1)


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect server on loopback (``local[2]``, a PostgreSQL metastore of its own), once per test session;
    its catalog loads Delta Lake (``TABLE_FORMATS``), as ``scripts/connect_server.py`` starts one for a catalog whose
    connection names ``delta``."""
    from tests.integration.spark_connect_server import running_spark_connect_server

    root = tmp_path_factory.mktemp("spark-connect")
    catalog = server_metastore(root, SESSION_METASTORE_DATABASE, table_formats=TABLE_FORMATS)
    with running_spark_connect_server(root, catalog) as server:
        yield server


@pytest.fixture(scope="session")
def delta_server(connect_server: Any) -> Any:
    """The Spark Connect server of the Delta Lake tests: session mode's, whose catalog loads Delta."""
    return connect_server


@pytest.fixture
def lake(delta_server: Any, request: pytest.FixtureRequest) -> Iterator[tuple[Any, str]]:
    """A Connect session on ``delta_server`` and a database of the test's own, dropped with its tables afterwards."""
    from spark_tables.hooks.spark_connect_job import connect_session

    database = "delta_" + re.sub(r"\W", "_", request.node.name.removeprefix("test_"))[:40]
    with connect_session(delta_server.url) as spark:
        spark.sql(f"CREATE DATABASE {database}")
        try:
            yield spark, database
        finally:
            spark.sql(f"DROP DATABASE IF EXISTS {database} CASCADE")


def server_metastore(root: Path, database: str, table_formats: tuple[str, ...] = TABLE_FORMATS) -> PostgresMetastore:
    """A Spark Connect server's PostgreSQL metastore: ``database`` emptied, the warehouse under ``root``."""
    return PostgresMetastore(
        host=PG_HOST,
        port=PG_PORT,
        user=PG_USER,
        password=pg_password(),
        database=_empty_database(database),
        warehouse=str(root / "warehouse"),
        table_formats=table_formats,
    )


@pytest.fixture
def spark_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A test's own provider home (``[spark_tables] home``), and the venv's spark-submit first on PATH, for the jobs
    a test runs through a hook in its own process."""
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    return tmp_path


@pytest.fixture(scope="session")
def in_session(tmp_path_factory: pytest.TempPathFactory, connect_server: Any) -> Deployment:
    """An Airflow whose ``spark_default`` is the Spark Connect server: its tasks run in session mode, on the server's
    catalog."""
    return _session_deployment(tmp_path_factory.mktemp("airflow-session"), connect_server)


@pytest.fixture(scope="session")
def in_session_twin(tmp_path_factory: pytest.TempPathFactory, connect_server: Any) -> Deployment:
    """A second Airflow (its own home and metadata DB) on the same Spark Connect server, catalog and warehouse."""
    return _session_deployment(tmp_path_factory.mktemp("airflow-session-twin"), connect_server)


def _session_deployment(home: Path, connect_server: Any) -> Deployment:
    catalog = connect_server.catalog
    deployment = postgres_deployment(home, catalog.database, Path(catalog.warehouse))
    env = {**deployment.env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(connect_server.connection)}
    return dataclasses.replace(deployment, env=env)


#: The day of the cluster's run of the @daily CTAS example (its tables are named after the day).
CLUSTER_CTAS_DS = "2026-11-20"
#: The day of the cluster's run of the buffered-output example: its topic's messages are told from those of
#: test_buffered_output's run (on the same broker) by the day of their key.
CLUSTER_BUFFERED_DS = "2026-01-03"


@pytest.fixture(scope="session")
def cluster_session(
    tmp_path_factory: pytest.TempPathFactory, on_cluster: Deployment, spark_cluster: Any, cluster_airflow: Any
) -> Iterator[Any]:
    """A Spark Connect server whose application runs on the cluster (its executors on the workers: one core of the
    two while it runs), on ``on_cluster``'s catalog, made ``cluster_airflow``'s ``spark_default`` through the REST
    API as an operator adds a connection; until the test session ends."""
    from tests.integration.spark_connect_server import running_spark_connect_server

    assert isinstance(on_cluster.catalog, PostgresMetastore)
    root = tmp_path_factory.mktemp("spark-connect-on-cluster")
    server_on_cluster = running_spark_connect_server(root, on_cluster.catalog, spark_cluster.master_url)
    with for_the_group("spark_cluster", server_on_cluster) as server:
        cluster_airflow.api("POST", "/connections", {"connection_id": "spark_default", **server.connection})
        yield server


@pytest.fixture(scope="session")
def cluster_examples(
    cluster_airflow: Any, cluster_session: Any, on_cluster: Deployment
) -> dict[str, tuple[str, ExampleRun]]:
    """The example DAGs on the cluster, finished: each one's run id and run. Five on ``cluster_airflow`` in session
    mode (``cluster_session``), triggered at once through the REST API as a user would; the plan example without a
    logical date (as a run from the UI may). The buffered-output example per job (its memory buffer is refused in
    session mode), by ``airflow dags test`` on ``on_cluster`` while the others run."""
    from tests.integration.ctas_checks import last_run_id
    from tests.integration.test_buffered_output import (
        EXAMPLE_CONF,
        buffered_demo_env,
        prepare_example_buffered_output,
    )
    from tests.integration.test_example_dag import DS as SQL_DS
    from tests.integration.test_plan import prepare_example_plan

    prepare_example_plan(CLUSTER_METASTORE_DATABASE)
    prepare_example_buffered_output(CLUSTER_METASTORE_DATABASE)
    airflow = cluster_airflow
    runs = {
        "example_spark_sql": airflow.trigger("example_spark_sql", {}, logical_date=f"{SQL_DS}T00:00:00Z"),
        "example_spark_ctas": airflow.trigger("example_spark_ctas", {}, logical_date=f"{CLUSTER_CTAS_DS}T00:00:00Z"),
        "example_spark_cache": airflow.trigger("example_spark_cache", {}),
        "example_spark_lookup": airflow.trigger("example_spark_lookup", {}),
        "example_spark_plan": airflow.trigger("example_spark_plan", {}),
    }
    buffered = "example_spark_buffered_output"
    per_job = dataclasses.replace(on_cluster, env={**on_cluster.env, **buffered_demo_env(CLUSTER_METASTORE_DATABASE)})
    buffered_run = dags_test(per_job, buffered, CLUSTER_BUFFERED_DS, "--conf", json.dumps(EXAMPLE_CONF))
    states = {dag_id: airflow.finished(dag_id, run_id, timeout=1500) for dag_id, run_id in runs.items()}
    assert states == dict.fromkeys(runs, "success")
    examples = {dag_id: (run_id, airflow.example_run(dag_id, run_id)) for dag_id, run_id in runs.items()}
    return {**examples, buffered: (last_run_id(per_job, buffered), buffered_run)}


@pytest.fixture(autouse=True)
def shared_class_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drivers a test starts from this process use the session's class-data archive as well."""
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__JVM_CLASS_ARCHIVE", str(JVM_CLASS_ARCHIVE))
