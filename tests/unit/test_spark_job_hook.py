"""SparkJobHook as constructed and as it would call spark-submit; nothing is submitted."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from airflow.sdk import ObjectStoragePath
from airflow.sdk.exceptions import AirflowTaskTimeout

from spark_tables.core.catalog_config import EmbeddedCatalog, PostgresMetastore
from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.ctas.result import CtasResult
from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import SECRET_PATTERN, JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.spark_job import DEFAULT_MASTER, SparkJobFailed, SparkJobHook, SparkMasterUnreachable
from spark_tables.tasks.sql_reader import read_statements
from spark_tables.utils.job_package import ENTRY_SCRIPT

pytestmark = pytest.mark.usefixtures("spark_tables_home")

SPEC = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///tmp/exchange/r.json")


@pytest.fixture
def catalog(spark_tables_home) -> EmbeddedCatalog:
    return EmbeddedCatalog(home=str(spark_tables_home))


@pytest.fixture
def cluster_connection(set_connection) -> str:
    set_connection("spark_cluster", conn_type="spark", host="yarn", extra={"deploy-mode": "cluster"})
    return "spark_cluster"


def _command(hook: SparkJobHook) -> list[str]:
    return hook.submit_command(ENTRY_SCRIPT)


def _option(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def _confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def _spec_argument(command: list[str]) -> JobSpec:
    assert command[-2] == ENTRY_SCRIPT
    return JobSpec.from_json(command[-1])


def test_without_spark_default_the_master_is_local(catalog):
    hook = SparkJobHook(spec=SPEC, catalog=catalog)

    assert hook.connection_settings["master"] == DEFAULT_MASTER == "local[*]"
    assert _option(_command(hook), "--master") == "local[*]"


def test_master_and_deploy_mode_come_from_the_connection(catalog, set_connection):
    set_connection("spark_x", conn_type="spark", host="local[2]", extra={"deploy-mode": "client"})

    command = _command(SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x"))

    assert _option(command, "--master") == "local[2]"
    assert _option(command, "--deploy-mode") == "client"


def test_spark_default_connection_is_used_when_it_exists(catalog, set_connection):
    set_connection("spark_default", conn_type="spark", host="local[3]")

    assert SparkJobHook(spec=SPEC, catalog=catalog).connection_settings["master"] == "local[3]"


def test_the_application_page_is_in_the_history_server_the_connection_names(catalog, set_connection):
    history = {"history-server-url": "http://history.example:18080/"}
    set_connection("spark_x", conn_type="spark", host="spark://m:7077", extra=history)
    hook = SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x")
    assert hook.application_url("app-1/2") == "http://history.example:18080/history/app-1%2F2/jobs/"
    assert hook.application_url(None) is None, "no application: the job never started"
    set_connection("spark_y", conn_type="spark", host="local[2]")
    assert SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_y").application_url("app-1") is None
    assert SparkJobHook(spec=SPEC, catalog=catalog).application_url("local-1") is None  # no spark_default


def test_the_master_shown_to_people_carries_no_user_or_password(catalog, set_connection):
    set_connection("spark_k8s", conn_type="spark", host="spark://admin:s3cret@m.example:7077")
    assert SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_k8s").master == "spark://m.example:7077"
    assert SparkJobHook(spec=SPEC, catalog=catalog).master == DEFAULT_MASTER


def test_missing_non_default_connection_is_rejected_by_name(catalog):
    with pytest.raises(SpecError, match="Spark connection 'spark_nowhere' does not exist") as caught:
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_nowhere")

    assert "\n" not in str(caught.value)


def test_invalid_deploy_mode_in_the_connection_is_rejected(catalog, set_connection):
    set_connection("spark_x", conn_type="spark", host="local[2]", extra={"deploy-mode": "sideways"})

    with pytest.raises(SpecError, match="deploy-mode 'sideways' is invalid"):
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x")


@pytest.mark.parametrize("how", ["connection", "argument"])
def test_cluster_deploy_mode_on_a_standalone_master_fails_before_submitting(catalog, set_connection, how):
    """spark-submit refuses it for Python applications on standalone masters, after starting a JVM."""
    extra = {"deploy-mode": "cluster"} if how == "connection" else {}
    set_connection("spark_x", conn_type="spark", host="spark://admin:pw@m1:7077,m2:7077", extra=extra)
    argument = {"deploy_mode": "cluster"} if how == "argument" else {}

    with pytest.raises(SpecError) as raised:
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x", **argument)

    assert str(raised.value) == (
        "Spark connection 'spark_x': deploy-mode cluster on the standalone master spark://m1:7077,m2:7077: Spark runs "
        "Python drivers only in client mode there: set deploy-mode client"
    )


def test_deploy_mode_argument_overrides_the_connections(catalog, set_connection):
    set_connection("spark_x", conn_type="spark", host="local[2]", extra={"deploy-mode": "client"})

    hook = SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x", deploy_mode="cluster")

    assert _option(_command(hook), "--deploy-mode") == "cluster"


@pytest.mark.parametrize("conn_id", ["spark_x", "spark_default"], ids=["with-connection", "without-spark-default"])
def test_invalid_deploy_mode_argument_is_rejected(catalog, set_connection, conn_id):
    # Fails today without spark_default: the local[*] fallback drops the deploy_mode argument unchecked.
    set_connection("spark_x", conn_type="spark", host="local[2]")

    with pytest.raises(SpecError, match="deploy-mode 'sideways' is invalid"):
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id=conn_id, deploy_mode="sideways")


def test_deploy_mode_argument_is_kept_without_spark_default(catalog):
    # Fails today: the local[*] fallback drops the deploy_mode argument.
    hook = SparkJobHook(spec=SPEC, catalog=catalog, deploy_mode="client")

    assert _option(_command(hook), "--deploy-mode") == "client"


def test_invalid_connection_extra_is_reported_as_a_spec_error(catalog, set_connection):
    set_connection("spark_x", conn_type="spark", host="local[2]", extra={"spark-binary": "rm"})

    with pytest.raises(SpecError, match="Spark connection 'spark_x' is invalid"):
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x")


def test_local_master_runs_python_workers_with_this_interpreter(catalog):
    confs = _confs(_command(SparkJobHook(spec=SPEC, catalog=catalog)))

    assert confs["spark.pyspark.python"] == sys.executable
    assert confs["spark.pyspark.driver.python"] == sys.executable


def test_explicit_python_conf_wins_over_this_interpreter(catalog):
    hook = SparkJobHook(spec=SPEC, catalog=catalog, conf={"spark.pyspark.python": "/opt/python/bin/python3"})

    assert _confs(_command(hook))["spark.pyspark.python"] == "/opt/python/bin/python3"


def test_remote_master_leaves_the_python_interpreter_alone(catalog, cluster_connection):
    confs = _confs(_command(SparkJobHook(spec=SPEC, catalog=catalog, conn_id=cluster_connection)))

    assert "spark.pyspark.python" not in confs
    assert "spark.pyspark.driver.python" not in confs


def test_catalog_conf_is_passed_to_spark_submit(catalog):
    confs = _confs(_command(SparkJobHook(spec=SPEC, catalog=catalog)))

    for key, value in catalog.spark_conf().items():
        assert confs[key] == value
    assert confs["spark.log.level"] == "WARN"


def test_user_conf_overrides_catalog_conf(catalog):
    hook = SparkJobHook(
        spec=SPEC,
        catalog=catalog,
        conf={"spark.sql.warehouse.dir": "file:/elsewhere", "spark.log.level": "INFO"},
    )

    confs = _confs(_command(hook))

    assert confs["spark.sql.warehouse.dir"] == "file:/elsewhere"
    assert confs["spark.log.level"] == "INFO"


def test_user_driver_java_options_are_joined_to_the_catalogs(catalog):
    hook = SparkJobHook(spec=SPEC, catalog=catalog, conf={"spark.driver.extraJavaOptions": "-Dfoo=1"})

    confs = _confs(_command(hook))

    assert confs["spark.driver.extraJavaOptions"] == (
        f"-Dderby.stream.error.file={os.path.join(catalog.home, 'derby.log')} -Dfoo=1"
    )


def test_user_executor_java_options_are_passed_as_given(catalog):
    hook = SparkJobHook(spec=SPEC, catalog=catalog, conf={"spark.executor.extraJavaOptions": "-Dbar=2"})

    assert _confs(_command(hook))["spark.executor.extraJavaOptions"] == "-Dbar=2"


def test_client_mode_spec_watches_this_process(catalog):
    spec = JobSpec(job=SPEC.job, result_uri=SPEC.result_uri, watch_pid=1)

    sent = _spec_argument(_command(SparkJobHook(spec=spec, catalog=catalog)))

    assert sent.watch_pid == os.getpid()
    assert (sent.job, sent.result_uri) == (SPEC.job, SPEC.result_uri)


def test_cluster_mode_spec_watches_no_process(catalog, cluster_connection):
    spec = JobSpec(job=SPEC.job, result_uri=SPEC.result_uri, watch_pid=os.getpid())

    command = _command(SparkJobHook(spec=spec, catalog=catalog, conn_id=cluster_connection))

    assert _option(command, "--master") == "yarn"
    assert _option(command, "--deploy-mode") == "cluster"
    assert _spec_argument(command).watch_pid is None
    assert json.loads(command[-1])["watch_pid"] is None


def test_py_files_start_with_the_job_package_zip(catalog, spark_tables_home):
    py_files = _option(_command(SparkJobHook(spec=SPEC, catalog=catalog)), "--py-files").split(",")

    assert len(py_files) == 1
    assert os.path.dirname(py_files[0]) == str(spark_tables_home / "dist")
    assert py_files[0].endswith(".zip") and os.path.isfile(py_files[0])


def test_user_py_files_follow_the_job_package_zip(catalog):
    hook = SparkJobHook(spec=SPEC, catalog=catalog, py_files="/opt/udfs.zip,/opt/more.py")

    py_files = _option(_command(hook), "--py-files").split(",")

    assert py_files[0].endswith(".zip") and "spark_tables-" in py_files[0]
    assert py_files[1:] == ["/opt/udfs.zip", "/opt/more.py"]


def test_embedded_catalog_adds_no_driver_class_path(catalog):
    assert "--driver-class-path" not in _command(SparkJobHook(spec=SPEC, catalog=catalog))


def test_postgres_metastore_puts_its_jdbc_driver_on_the_driver_class_path():
    metastore = PostgresMetastore(host="db", database="hms", warehouse="/wh", jdbc_driver_jar="/jars/pg.jar")

    hook = SparkJobHook(spec=SPEC, catalog=metastore, driver_class_path="/jars/extra.jar")

    assert _option(_command(hook), "--driver-class-path") == "/jars/pg.jar:/jars/extra.jar"


class _RunningProcess:
    """Stands in for spark-submit's process: running until the test lets it end."""

    pid = 0

    def __init__(self) -> None:
        self.waited = threading.Event()
        self.ended = threading.Event()

    def poll(self) -> int | None:
        return 0 if self.ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        self.waited.set()
        self.ended.wait(timeout)
        return 0


def test_on_kill_logs_nothing_in_the_thread_it_interrupts(catalog, tmp_path):
    """Airflow calls on_kill from its SIGTERM handler: logging there deadlocks if that thread held the log lock."""
    hook = SparkJobHook(spec=SPEC, catalog=catalog)
    process, marker = _RunningProcess(), tmp_path / "r.cancel"
    hook.submit_process, hook._cancel_path = process, ObjectStoragePath(f"file://{marker}")
    log_lock, logged_from = threading.Lock(), []

    class LogWithAWriteLock:
        def _write(self, *args: object) -> None:
            logged_from.append(threading.get_ident())
            if log_lock.acquire(timeout=5):  # not reentrant, as structlog's write lock: the same thread would hang
                log_lock.release()

        info = warning = _write

    hook._log = LogWithAWriteLock()
    try:
        with log_lock:  # the interrupted thread was writing a log line
            hook.on_kill()
        assert process.waited.wait(10), "the stopping thread must write the marker, then wait for the job"
    finally:
        process.ended.set()

    assert marker.read_text() == "stop"
    assert logged_from and threading.get_ident() not in logged_from


#: Stands in for spark-submit and its driver: waits for the cancel marker, writes a result, exits as a stopped job.
_STOPPABLE_JOB = """
import json, os, sys, time
result, marker = sys.argv[1], sys.argv[2]
print("job running", flush=True)
while not os.path.exists(marker):
    time.sleep(0.05)
output = {"table": "db.t", "atomicity": "table", "cleaned_up": True}
with open(result, "w") as handle:
    json.dump({"version": 1, "kind": "ctas", "error": "cancelled: asked", "output": output}, handle)
print("job undone and stopped", flush=True)
sys.exit(143)
"""


def test_a_task_interrupted_while_its_job_runs_stops_the_job_in_order_first(catalog, tmp_path, monkeypatch):
    """execution_timeout raises in the task process mid-wait: the job must stop and undo before the task goes on."""
    result, marker = tmp_path / "r.json", tmp_path / "r.cancel"
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"file://{result}")
    hook = SparkJobHook(spec=spec, catalog=catalog)
    logged: list[str] = []
    monkeypatch.setattr(hook.log, "info", lambda message, *args: logged.append(message % args if args else message))

    def submit_then_time_out(application: str, **popen_kwargs: object) -> None:
        hook.submit_process = subprocess.Popen(
            [sys.executable, "-c", _STOPPABLE_JOB, str(result), str(marker)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert hook.submit_process.stdout.readline() == "job running\n"
        raise AirflowTaskTimeout("Timeout")  # as the SIGALRM handler raises it, while the job runs

    monkeypatch.setattr(hook, "submit", submit_then_time_out)

    try:
        with pytest.raises(AirflowTaskTimeout):
            hook.run()
    finally:
        if hook.submit_process.poll() is None:  # run() gave up on it: never leave it behind
            hook.submit_process.kill()

    assert hook.submit_process.returncode == 143, "the job ended before run() gave up"
    assert "job undone and stopped" in logged, "the job's log is still passed on while it stops"
    assert hook.last_result is not None and hook.last_result.output == CtasResult(
        table="db.t", atomicity="table", cleaned_up=True
    )
    assert not result.exists() and not marker.exists(), "the result is read and the marker removed"


def test_a_spec_too_long_for_a_command_line_goes_through_a_file_beside_the_result(catalog, tmp_path, monkeypatch):
    statements = tuple(f"SELECT {n} AS a_long_statement_{'x' * 200}" for n in range(400))  # about 90 kB
    spec = JobSpec(job=SqlJob(statements=statements), result_uri=f"file://{tmp_path}/r.json")
    hook = SparkJobHook(spec=spec, catalog=catalog)
    seen: list[str] = []

    def submit(application: str, **popen_kwargs: object) -> None:
        seen.append(Path(hook.application_args[0].removeprefix("@file://")).read_text())
        (tmp_path / "r.json").write_text(json.dumps({"version": 1, "kind": "sql", "output": {}}))

    monkeypatch.setattr(hook, "submit", submit)
    hook.run()

    argument = _command(hook)[-1]
    assert argument == f"@file://{tmp_path}/r.spec.json" and len(argument) < len(str(tmp_path)) + 30
    assert tuple(statement.text for statement in JobSpec.from_json(seen[0]).job.statements) == statements
    assert not (tmp_path / "r.spec.json").exists(), "the spec file is removed once the job ended"


def test_a_short_spec_stays_on_the_command_line(catalog):
    assert _spec_argument(_command(SparkJobHook(spec=SPEC, catalog=catalog))).job == SPEC.job


METASTORE_PASSWORD = "m3tastore-Pa55"


def _metastore_with_a_password() -> PostgresMetastore:
    return PostgresMetastore(host="db", database="hms", warehouse="/wh", user="hive", password=METASTORE_PASSWORD)


def test_a_metastore_password_is_never_on_the_command_line_but_in_the_private_spec_file(tmp_path, monkeypatch):
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"file://{tmp_path}/r.json")
    hook = SparkJobHook(spec=spec, catalog=_metastore_with_a_password())
    seen: list[tuple[int, str]] = []

    def submit(application: str, **popen_kwargs: object) -> None:
        spec_file = Path(hook.application_args[0].removeprefix("@file://"))
        seen.append((stat.S_IMODE(spec_file.stat().st_mode), spec_file.read_text()))
        (tmp_path / "r.json").write_text(json.dumps({"version": 1, "kind": "sql", "output": {}}))

    monkeypatch.setattr(hook, "submit", submit)
    hook.run()

    command = _command(hook)
    assert not [arg for arg in command if METASTORE_PASSWORD in arg]
    assert not [arg for arg in command if "ConnectionPassword" in arg], "not even an empty one over the real one"
    confs = _confs(command)
    assert confs["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"  # the rest of the catalog conf is there
    assert confs["spark.hadoop.javax.jdo.option.ConnectionURL"] == "jdbc:postgresql://db:5432/hms"
    assert command[-1] == f"@file://{tmp_path}/r.spec.json"
    [(mode, spec_json)] = seen
    assert mode == 0o600, "the spec file is readable by its owner only"
    sent = JobSpec.from_json(spec_json)
    assert sent.session_conf == {
        "spark.hadoop.javax.jdo.option.ConnectionPassword": METASTORE_PASSWORD,
        "spark.redaction.regex": SECRET_PATTERN,
    }
    assert sent.carries_credentials
    assert not (tmp_path / "r.spec.json").exists(), "the spec file is removed once the job ended"


def test_a_metastore_without_a_password_keeps_a_short_spec_on_the_command_line():
    metastore = PostgresMetastore(host="db", database="hms", warehouse="/wh")

    sent = _spec_argument(_command(SparkJobHook(spec=SPEC, catalog=metastore)))

    assert sent.session_conf == {} and sent.job == SPEC.job


def test_a_password_the_task_conf_gives_wins_over_the_catalogs():
    key = "spark.hadoop.javax.jdo.option.ConnectionPassword"

    hook = SparkJobHook(spec=SPEC, catalog=_metastore_with_a_password(), conf={key: "the-tasks-own"})

    command = _command(hook)
    assert key not in _confs(command)
    assert hook.spec.session_conf[key] == "the-tasks-own"  # the task's explicit choice, as for any other setting
    assert METASTORE_PASSWORD not in " ".join(command) and "the-tasks-own" not in " ".join(command)


SECRET_CONF = {
    "spark.hadoop.fs.s3a.secret.key": "s3-secret",
    "spark.hadoop.fs.s3a.access.key": "s3-access",
    "spark.openlineage.transport.auth.apiKey": "ol-key",
    "spark.jdbc.password": "jdbc-pass",
    "spark.kafka.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule password='k'",
    "spark.some.token": "a-token",
}


def test_a_task_s_secret_conf_goes_to_the_private_spec_file_never_the_command_line(catalog, tmp_path, caplog):
    """``ps``, the task log's Spark-Submit line and Spark's UI show a command line: secrets go in the spec file."""
    spec = dataclasses.replace(SPEC, result_uri=f"file://{tmp_path}/r.json")
    hook = SparkJobHook(spec=spec, catalog=catalog, conf={**SECRET_CONF, "spark.sql.shuffle.partitions": "4"})

    with caplog.at_level(logging.INFO):
        command = _command(hook)

    line = " ".join(command)
    for value in SECRET_CONF.values():
        assert value not in line and value not in caplog.text
    assert _confs(command)["spark.sql.shuffle.partitions"] == "4"
    assert command[-1] == f"@file://{tmp_path}/r.spec.json", "a spec with secrets never goes on the command line"
    assert hook.spec.session_conf == {**SECRET_CONF, "spark.redaction.regex": SECRET_PATTERN}
    assert hook.spec.carries_credentials


def test_spark_s_redaction_hides_every_name_the_spec_file_takes():
    redaction = re.compile(SECRET_PATTERN)
    assert all(redaction.search(key) for key in SECRET_CONF)
    assert not redaction.search("spark.sql.shuffle.partitions")


def test_a_standalone_master_that_takes_no_connection_fails_naming_it(catalog, set_connection):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    set_connection("spark_x", conn_type="spark", host=f"spark://127.0.0.1:{port}", extra={"deploy-mode": "client"})
    hook = SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x")

    with pytest.raises(SparkMasterUnreachable) as raised:
        hook.check_master()

    assert str(raised.value) == (
        f"Spark master spark://127.0.0.1:{port} of connection 'spark_x' cannot be reached (127.0.0.1:{port}: "
        "Connection refused): start it, or correct the connection's host and port"
    )


def test_a_standalone_master_that_listens_passes_the_check(catalog, set_connection):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        master = f"spark://127.0.0.1:{server.getsockname()[1]}"
        set_connection("spark_x", conn_type="spark", host=master)
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id="spark_x").check_master()


class _Recorder:
    """Stands in for the hook's logger: what it was told, at which level."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def __getattr__(self, level: str):
        return lambda message, *args, **kwargs: self.records.append((level, message % args if args else message))


@pytest.mark.parametrize(
    ("conn_type", "extra"), [("postgres", {}), ("http", {}), ("spark_tables", {"warehouse": "/w"})]
)
def test_a_connection_that_is_no_spark_connection_fails_in_one_line_naming_its_type(
    catalog, set_connection, no_process, conn_type, extra
):
    set_connection("crm", conn_type=conn_type, host="127.0.0.1", port=5432, extra=extra)

    with pytest.raises(SpecError) as failed:
        SparkJobHook(spec=SPEC, catalog=catalog, conn_id="crm")

    assert str(failed.value) == (
        f"connection 'crm' is of type '{conn_type}', not a Spark connection: give conn_id a connection of type spark "
        "(spark-submit; host = the master URL, such as local[*] or spark://host:7077) or spark_connect (a Spark "
        "Connect server: session mode)"
    )


def test_without_spark_default_one_true_line_says_where_the_job_runs(catalog, monkeypatch):
    recorder = _Recorder()
    monkeypatch.setattr(SparkJobHook, "_log", recorder, raising=False)  # as LoggingMixin finds it, from __init__ on

    hook = SparkJobHook(spec=SPEC, catalog=catalog)
    _command(hook)

    infos = [message for level, message in recorder.records if level == "info"]
    assert infos == ["Spark connection 'spark_default' does not exist: the job runs on local[*]"]
    debugs = [message for level, message in recorder.records if level == "debug"]
    assert "Could not load connection string spark_default, defaulting to yarn" in debugs
    assert any(message.startswith("Spark-Submit cmd: ") for message in debugs), "the command is at DEBUG level"


#: Stands in for spark-submit: the driver writes its result with the job's one-line error, and exits 1.
_FAILING_SUBMIT = """#!{python}
import json, sys
spec = json.loads(sys.argv[-1])
with open(spec["result_uri"].removeprefix("file://"), "w") as handle:
    json.dump({{"version": 1, "kind": "sql", "error": "statement 1/1 failed: [TABLE_OR_VIEW_NOT_FOUND] The table or "
               "view `t` cannot be found. SQLSTATE: 42P01"}}, handle)
print("spark_tables ERROR sql job failed: ...", flush=True)
sys.exit(1)
"""


def test_a_failed_job_fails_the_task_with_its_own_line_and_no_command_before_it(catalog, tmp_path, monkeypatch):
    fake = tmp_path / "spark-submit"
    fake.write_text(_FAILING_SUBMIT.format(python=sys.executable))
    fake.chmod(0o755)
    spec = JobSpec(job=SqlJob(statements=("SELECT * FROM t",)), result_uri=f"file://{tmp_path}/r.json")
    hook = SparkJobHook(spec=spec, catalog=catalog)
    hook._spark_binary_path = str(fake)
    recorder = _Recorder()
    hook._log = recorder

    with pytest.raises(SparkJobFailed) as failed:
        hook.run()

    assert str(failed.value) == (
        "statement 1/1 failed: [TABLE_OR_VIEW_NOT_FOUND] The table or view `t` cannot be found. SQLSTATE: 42P01"
    )
    assert failed.value.__cause__ is None and failed.value.__suppress_context__, "no spark-submit command chained"
    infos = " ".join(message for level, message in recorder.records if level == "info")
    assert "--conf" not in infos and "SELECT * FROM t" not in infos, "command and spec only at DEBUG level"
    debugs = [message for level, message in recorder.records if level == "debug"]
    assert any(message.startswith("Cannot execute: ") and str(fake) in message for message in debugs)


def test_the_catalog_s_table_formats_jars_go_to_the_driver_and_executors_before_the_task_s_own(spark_tables_home):
    lake = EmbeddedCatalog(home=str(spark_tables_home), table_formats=("delta",))
    hook = SparkJobHook(spec=SPEC, catalog=lake, jars="/jars/udfs.jar")

    assert _option(_command(hook), "--jars").split(",") == [*lake.jars, "/jars/udfs.jar"]
    assert [os.path.basename(jar) for jar in lake.jars] == ["delta-spark_4.2_2.13.jar", "delta-storage.jar"]


def test_a_task_s_sql_extensions_join_the_catalog_s_table_formats_extensions(spark_tables_home):
    lake = EmbeddedCatalog(home=str(spark_tables_home), table_formats=("delta",))
    hook = SparkJobHook(spec=SPEC, catalog=lake, conf={"spark.sql.extensions": "com.example.Extensions"})

    confs = _confs(_command(hook))

    assert confs["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension,com.example.Extensions"
    assert confs["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def test_a_catalog_without_table_formats_loads_no_jar_and_no_extension(catalog):
    hook = SparkJobHook(spec=SPEC, catalog=catalog, conf={"spark.sql.extensions": "com.example.Extensions"})

    command = _command(hook)

    assert "--jars" not in command
    assert _confs(command)["spark.sql.extensions"] == "com.example.Extensions"
    assert "spark.sql.catalog.spark_catalog" not in _confs(command)


@pytest.mark.parametrize(
    "job",
    [
        CtasJob(table="db.t", query="SELECT 1", format="delta", owner=TableOwner("d", "r", "t")),
        SqlJob(
            statements=read_statements(["SELECT 1", "CREATE TABLE db.t USING delta AS SELECT 1"]),
            owner=TableOwner("d", "r", "t"),
        ),
    ],
    ids=["ctas", "sql"],
)
def test_a_job_that_makes_a_table_in_a_format_its_catalog_does_not_load_fails_before_its_submit(catalog, job):
    with pytest.raises(SpecError) as refused:
        SparkJobHook(spec=dataclasses.replace(SPEC, job=job), catalog=catalog)

    assert str(refused.value) == (
        'table format delta is not loaded by this catalog: add "delta" to the catalog connection\'s extra '
        "'table-formats', which gives Spark io.delta:delta-spark_4.2_2.13:4.4.0, io.delta:delta-storage:4.4.0 and "
        "its session catalog (docs/table-formats.md)"
    )


def test_a_job_of_spark_s_file_formats_needs_no_table_format(catalog):
    job = CtasJob(table="db.t", query="SELECT 1", format="orc", owner=TableOwner("d", "r", "t"))

    assert SparkJobHook(spec=dataclasses.replace(SPEC, job=job), catalog=catalog).spec.job == job
