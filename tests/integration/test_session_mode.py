"""Session mode: tasks whose ``spark_default`` is a Spark Connect server run their jobs there, as its clients, and a
server that takes no connection fails them at once. The scenarios run in both modes are elsewhere: the cache's
lifecycle (``test_cache.py``), the SQL example (``test_example_dag.py``), a CTAS stopped by an execution timeout and
by SIGTERM (``test_ctas_interrupted.py``); the lookup joins run in session mode alone (``test_lookup.py``)."""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import socket
import urllib.request
from typing import Any

import pytest

from tests.integration.airflow_services import wait_for
from tests.integration.conftest import PG_HOST, PG_PORT, Deployment, _empty_database, dags_test
from tests.integration.ctas_checks import (
    metastore_tables,
    related,
    run_dag,
    with_scenarios,
    xcom,
)
from tests.integration.test_buffered_output import DAG_ID as BUFFERED_DAG_ID
from tests.integration.test_buffered_output import (
    EXAMPLE_CONF,
    _expected_views,
    _table,
    buffered_demo_env,
    prepare_example_buffered_output,
)
from tests.integration.test_plan import (
    _pg,
    check_example_plan_output,
    plan_demo_env,
    prepare_example_plan,
)

pytestmark = pytest.mark.integration


def test_a_task_runs_its_job_on_the_server_in_a_session_of_its_own(in_session: Deployment, connect_server: Any):
    table = "made_in_session"
    run = run_dag(with_scenarios(in_session), "ctas_slow_table", table, rows=1000)

    assert run.returncode == 0, run.output[-4000:]
    output = xcom(in_session, "ctas_slow_table", run.run_id, "ctas")
    assert output["mode"] == "session"
    assert output["master"] == connect_server.url
    assert output["application_id"] == connect_server.application_id(), "the server's application, not one of its own"
    assert "Spark-Submit cmd" not in run.output, "no spark-submit"
    assert "Spark Connect session" in run.output
    assert connect_server.jobs_tagged("ctas_slow_table.ctas"), "the job's operations carry the task's name as tag"
    assert related(metastore_tables(in_session), table) == {table}
    assert connect_server.running_jobs() == []


def test_a_server_that_takes_no_connection_fails_the_task_naming_it_before_anything_is_made(in_session: Deployment):
    with socket.socket() as closed:  # bound, never listening: nothing takes a connection on its port
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        connection = {"conn_type": "spark_connect", "host": "127.0.0.1", "port": port}
        nowhere = Deployment(
            home=in_session.home,
            catalog=in_session.catalog,
            env={**in_session.env, "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(connection)},
        )
        table = "never_made_in_session"
        run = run_dag(with_scenarios(nowhere), "ctas_slow_table", table, rows=1000)

    assert run.returncode != 0
    assert f"Spark Connect server sc://127.0.0.1:{port} of connection 'spark_default' cannot be reached" in run.output
    assert related(metastore_tables(in_session), table) == set(), "nothing was created"


def test_a_job_asks_a_connect_session_for_the_application_and_its_parallelism(connect_server: Any):
    from spark_tables.hooks.spark_connect_job import CONNECT_MODE_VARIABLE, connect_session
    from spark_tables.jobs.session_facts import application_id, default_parallelism, is_connect, splits_in_plan

    with connect_session(connect_server.url) as spark:
        assert is_connect(spark)
        assert application_id(spark) == connect_server.application_id()
        assert default_parallelism(spark) == 2, "the server's local[2]"
        assert splits_in_plan(spark) == 2, "read from the plan, without a Spark job (Spark's plan text still says it)"
    assert CONNECT_MODE_VARIABLE not in os.environ, "this process's later sessions and spark-submits are classic"


def test_a_dag_runs_each_task_in_the_mode_of_its_connection_and_they_share_the_metastore(
    in_session: Deployment, connect_server: Any
):
    """A session-mode task, then a per-job one that reads its table: ``airflow dags test`` runs both in one process,
    so the second one's spark-submit must not inherit the first one's Connect client mode."""
    scenarios = with_scenarios(in_session)
    env = {k: v for k, v in scenarios.env.items() if k != "AIRFLOW_CONN_SPARK_DEFAULT"}  # the local spark-submit
    env["AIRFLOW_CONN_SPARK_SESSION"] = json.dumps(connect_server.connection)
    deployment = dataclasses.replace(scenarios, env=env)
    table = "made_in_both_modes"
    run = run_dag(deployment, "ctas_in_both_modes", table)

    assert run.returncode == 0, run.output
    made, copied = (xcom(deployment, "ctas_in_both_modes", run.run_id, task) for task in ("in_session", "per_job"))
    assert made is not None and copied is not None, run.output
    assert (made["mode"], copied["mode"]) == ("session", "per-job")
    assert made["application_id"] == connect_server.application_id()
    assert copied["application_id"] != made["application_id"]
    assert (made["rows"], copied["rows"]) == (100, 100)
    tables = metastore_tables(in_session)
    assert (related(tables, table), related(tables, f"{table}_copy")) == ({table}, {f"{table}_copy"})


def test_the_servers_python_workers_import_the_provider_only_from_the_code_a_session_ships(
    connect_server: Any, tmp_path: Any
):
    """The tests' server is as one installed from stock Spark: its Python workers lack this provider, so a job's
    functions that run there (lookups' ``mapInArrow``) import it from the zip its session ships."""
    import pyarrow as pa

    from spark_tables.hooks.spark_connect_job import connect_session
    from spark_tables.utils.job_package import job_package

    def importable(batches: Any) -> Any:
        import importlib.util

        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"found": importlib.util.find_spec("spark_tables") is not None}])

    with connect_session(connect_server.url) as spark:
        [[before]] = spark.range(1).mapInArrow(importable, "found boolean").collect()
        spark.addArtifacts(job_package(str(tmp_path)), pyfile=True)
        [[after]] = spark.range(1).mapInArrow(importable, "found boolean").collect()
    assert (before, after) == (False, True)


@pytest.mark.parametrize("operation", ["write", "count"])
def test_a_jdbc_read_s_password_shows_nowhere_on_the_server(connect_server: Any, operation: str) -> None:
    """The server's UI (its Connect tab) and event log show each operation's plan as text, a JDBC read's options
    included: the provider's reader (a full-cache load's) hides the secret ones. The password is one no server knows,
    so the read fails; its plan is shown all the same."""
    from spark_tables.hooks.spark_connect_job import connect_session
    from spark_tables.jobs.postgres import jdbc_reader

    password = f"never-shown-{secrets.token_hex(8)}"
    args = {"host": PG_HOST, "port": PG_PORT, "dbname": "postgres", "user": "nobody_here", "password": password}
    with connect_session(connect_server.url) as spark:
        frame = jdbc_reader(spark, args).option("dbtable", "pg_class").load()
        with pytest.raises(Exception, match=r"FAILED_JDBC\.CONNECTION"):
            frame.write.format("noop").mode("overwrite").save() if operation == "write" else frame.count()

    with urllib.request.urlopen(f"http://127.0.0.1:{connect_server.ui_port}/connect/", timeout=10) as page:
        shown = page.read().decode()
    events = "".join(path.read_text(errors="replace") for path in connect_server.events.rglob("events_*"))
    assert "nobody_here" in shown + events, "the operation's plan is shown"
    for where in (shown, events, (connect_server.root / "server.log").read_text(errors="replace")):
        assert password not in where


#: The examples' PostgreSQL tables in session mode: a database of their own, apart from the per-job runs' (whose
#: test files may run at the same time on the other xdist worker).
SESSION_DEMO_DATABASE = "spark_tables_session_demo"


@pytest.fixture(scope="module")
def demo_database() -> str:
    return _empty_database(SESSION_DEMO_DATABASE)


def test_the_plan_example_compiles_explains_and_executes_its_plan_in_session_mode(
    in_session: Deployment, demo_database: str
):
    """EXECUTE PLAN's sinks write each micro-batch from foreachBatch, whose function runs in the server's own Python,
    which has no provider: it travels with the provider's code, and what it wrote reaches the job through files."""
    env = {**in_session.env, **plan_demo_env(demo_database, in_session.home)}
    deployment = dataclasses.replace(in_session, env=env)
    prepare_example_plan(demo_database)
    run = dags_test(deployment, "example_spark_plan")

    assert {run.xcoms[task]["mode"] for task in ("compile", "explain", "execute")} == {"session"}
    check_example_plan_output(run, demo_database)
    assert run.log.count("shipped the job's code to the session") == 4


def test_buffered_output_runs_in_the_state_store_in_session_mode_and_a_memory_buffer_is_refused(
    in_session: Deployment, demo_database: str
):
    """The buffered example's unbuffered and buffered aggregations write and count as in per-job mode, the buffer in
    the state store (per job it is logged in the driver: one batch fewer); its memory-buffered one is refused at task
    start, in one line, before anything runs."""
    deployment = dataclasses.replace(in_session, env={**in_session.env, **buffered_demo_env(demo_database)})
    prepare_example_buffered_output(demo_database)
    done = deployment.airflow("dags", "test", BUFFERED_DAG_ID, "2026-01-02", "--conf", json.dumps(EXAMPLE_CONF))
    log = done.stdout + done.stderr

    assert done.returncode != 0, "the memory-buffered task fails"
    assert (
        "execution.flush.memory-buffer-only does not run in session mode: the buffer would live in the Spark Connect "
        "server's Python, where the job cannot flush it" in log
    )
    x = deployment.latest_xcoms(BUFFERED_DAG_ID)
    assert "views_memory_buffered" not in x
    unbuffered, buffered = (x[f"views_{way}"]["query"] for way in ("unbuffered", "buffered"))
    assert {x[f"views_{way}"]["mode"] for way in ("unbuffered", "buffered")} == {"session"}
    expected = _expected_views()
    assert _table("unbuffered", demo_database) == _table("buffered", demo_database) == expected
    assert [query["batches"] for query in (unbuffered, buffered)] == [8, 9]
    assert unbuffered["input_rows"] == 2000
    assert unbuffered["write_calls"] == 8 and unbuffered["rows_upserted"] > 400
    assert buffered["buffer"] == {
        "store": "state-store",  # foreachBatch runs in the server: the durable buffer is in the state store
        "records_in": 2000,
        "records_emitted": 100,
        "flushes": {"interval": 0, "idle": 0, "end": 1},
    }
    assert (buffered["rows_upserted"], buffered["write_calls"]) == (100, 1)
    assert _pg("SELECT count(*) FROM spark_tables_demo.page_views_memory_buffered", demo_database) == [(0,)]


def test_a_lookup_join_of_a_stream_enriches_its_micro_batches_in_the_servers_python(connect_server: Any, tmp_path: Any):
    """The stream's foreachBatch function runs in the server's own Python, which has no provider: it travels with the
    provider's code, and what it counted there reaches the job's result through the file it leaves; a Kafka topic's
    probe too, its skipped messages counted from the query's progress as the client sees it."""
    from spark_tables.hooks.spark_connect_job import connect_session
    from spark_tables.utils.job_package import job_package
    from tests.spark.test_lookup_join import (
        HOURLY,
        _spec,
        check_stream_metrics,
        dimension_table,
        enrich_a_stream,
        enrich_a_topic,
    )

    with dimension_table("lookup_session_tests") as table, connect_session(connect_server.url) as spark:
        spark.addArtifacts(job_package(str(tmp_path / "dist")), pyfile=True)  # as the task does: NONE's workers
        full_spec = _spec(table, tmp_path, "FULL", **HOURLY)
        full = enrich_a_stream(spark, full_spec, tmp_path, "session_enriched_full")
        none = enrich_a_stream(spark, _spec(table, tmp_path, "NONE"), tmp_path, "session_enriched_none")
        enrich_a_topic(spark, table, tmp_path / "topic", "session_enriched_topic")  # the server's Kafka connector

    check_stream_metrics(full, none, full_spec)


def test_a_stop_the_server_loses_ends_the_task_after_the_grace_and_releases_its_session(
    connect_server: Any, spark_env: Any, monkeypatch: pytest.MonkeyPatch
):
    """The server interrupts an operation once, and a thread of its own can lose that interrupt (Hadoop's shell
    commands swallow it, SPARK-20301): the operation then runs on. The task does not wait for it past the grace: it
    fails saying so, and its session is released. Here the session's ``interruptAll`` names the operation without
    interrupting it, as a lost interrupt looks to the client; the release then stops the query, which was never
    interrupted."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from spark_tables.core.job_spec import JobSpec
    from spark_tables.core.sql.job import SqlJob
    from spark_tables.hooks import spark_connect_job
    from spark_tables.hooks.spark_job import SparkJobFailed
    from tests.integration.long_job import LONG_QUERY, run_in_thread

    monkeypatch.setattr(ConnectSession, "interruptAll", lambda self: ["the query"])
    monkeypatch.setattr(spark_connect_job, "CANCEL_GRACE_SECONDS", 3)
    monkeypatch.setenv("AIRFLOW_CONN_LOSES_INTERRUPTS", json.dumps(connect_server.connection))
    spec = JobSpec(job=SqlJob(statements=(LONG_QUERY,)), result_uri=f"file://{spark_env}/result.json")
    hook = spark_connect_job.SparkConnectJobHook(spec=spec, conn_id="loses_interrupts", name="loses_interrupts")
    runner, failures = run_in_thread(hook)
    wait_for("the query to run on the server", lambda: connect_server.running_jobs_tagged("loses_interrupts"))
    hook.on_kill()
    runner.join(timeout=3 + 60)

    assert not runner.is_alive(), "run() must return once the grace has passed"
    assert len(failures) == 1 and isinstance(failures[0], SparkJobFailed), failures
    assert str(failures[0]).startswith("the Spark job did not stop within 3 s of the request: the Spark Connect server")
    wait_for("the released session's query to stop", lambda: connect_server.running_jobs() == [])
