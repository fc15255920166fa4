"""Session mode's hook, without a server: the connection it reads, what it shows of it, and the checks that fail in
one line before any job runs. Jobs on a real Spark Connect server are in tests/integration/test_session_mode.py."""

from __future__ import annotations

import socket
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.kinds import KINDS
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.spark_connect_job import SparkConnectJobHook, SparkConnectUnreachable, connects_to_server
from spark_tables.operators.sql import SparkSqlJobOperator
from tests.unit.task_context import task_context

SPEC = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///tmp/exchange/result.json")


def refused(job: Any) -> str | None:
    """Why session mode refuses ``job``, as its kind says (``core.kinds``)."""
    return KINDS[job.kind].refused_in_session_mode(job)


def _hook(conn_id: str = "spark_connect_default", **kwargs) -> SparkConnectJobHook:
    return SparkConnectJobHook(spec=SPEC, conn_id=conn_id, **kwargs)


def test_a_spark_connect_connection_means_session_mode_and_any_other_or_none_does_not(set_connection):
    set_connection("server", conn_type="spark_connect", host="spark.example", port=15002)
    set_connection("cluster", conn_type="spark", host="spark://spark.example:7077")

    assert connects_to_server("server") is True
    assert connects_to_server("cluster") is False
    assert connects_to_server("spark_default") is False, "a missing spark_default is local spark-submit"


def test_the_server_is_shown_without_the_token_or_user_the_session_url_carries(set_connection):
    set_connection("server", conn_type="spark_connect", host="spark.example", port=443, login="etl", password="s3cr3t")
    hook = _hook("server")

    assert hook.master == "sc://spark.example:443"
    url = hook._url  # what pyspark's channel gets
    assert url.startswith("sc://spark.example:443/;user_id=etl;token=s3cr3t;session_id=")
    assert uuid.UUID(url.rsplit("session_id=", 1)[1]) == uuid.UUID(hook.session_id)


def test_a_connection_without_a_port_uses_spark_connect_s_and_gets_a_session_of_its_own(set_connection):
    set_connection("server", conn_type="spark_connect", host="sc://spark.example")

    first, second = _hook("server"), _hook("server")

    assert first.master == "sc://spark.example:15002"
    assert first._url == f"sc://spark.example/;session_id={first.session_id}"
    assert first.session_id != second.session_id


def test_a_missing_connection_is_named_with_what_to_create():
    with pytest.raises(SpecError, match=r"^Spark Connect connection 'nowhere' does not exist: create it \(type"):
        _hook("nowhere")


def test_a_connection_with_a_path_is_refused_in_one_line(set_connection):
    set_connection("server", conn_type="spark_connect", host="sc://spark.example/some/path")

    with pytest.raises(SpecError, match=r"^Spark Connect connection 'server' is invalid: Path"):
        _hook("server")


def test_a_server_that_takes_no_connection_fails_naming_host_and_port(set_connection):
    with socket.socket() as probe:  # bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        set_connection("server", conn_type="spark_connect", host="127.0.0.1", port=port)

        with pytest.raises(SparkConnectUnreachable) as raised:
            _hook("server").check_master()

    assert str(raised.value) == (
        f"Spark Connect server sc://127.0.0.1:{port} of connection 'server' cannot be reached (Connection refused): "
        "start it, or correct the connection's host and port"
    )


def test_a_server_that_listens_passes_the_check(set_connection):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        set_connection("server", conn_type="spark_connect", host="127.0.0.1", port=server.getsockname()[1])
        _hook("server").check_master()


@pytest.mark.parametrize(("server", "fails"), [("4.0.1", False), ("4.2.0", False), ("3.5.3", True), ("5.0.0", True)])
def test_a_server_of_another_spark_major_version_fails_naming_both(set_connection, server, fails):
    set_connection("server", conn_type="spark_connect", host="127.0.0.1", port=15002)
    session = SimpleNamespace(version=server)  # what the check reads of a session

    if not fails:
        _hook("server")._check_version(session)
        return
    with pytest.raises(SpecError) as raised:
        _hook("server")._check_version(session)
    assert str(raised.value) == (
        f"Spark Connect server sc://127.0.0.1:15002 runs Spark {server}, this provider's client is Spark 4.2.0: use a "
        "server of Spark 4"
    )


def test_the_task_s_conf_is_kept_as_strings_for_the_session(set_connection):
    set_connection("server", conn_type="spark_connect", host="127.0.0.1", port=15002)

    hook = _hook("server", conf={"spark.sql.shuffle.partitions": 4, "spark.sql.ansi.enabled": True})

    assert hook.conf == {"spark.sql.shuffle.partitions": "4", "spark.sql.ansi.enabled": "True"}


@pytest.mark.parametrize(
    ("argument", "value"),
    [("driver_memory", "2g"), ("executor_memory", "2g"), ("num_executors", 2), ("jars", "x.jar"), ("py_files", "a.py")],
)
def test_a_spark_submit_argument_on_a_spark_connect_connection_fails_before_anything_runs(
    set_connection, spark_tables_home, argument, value
):
    set_connection("server", conn_type="spark_connect", host="127.0.0.1", port=15002)
    operator = SparkSqlJobOperator(task_id="t", sql="SELECT 1", conn_id="server", **{argument: value})
    context = task_context()

    with pytest.raises(SpecError) as raised:
        operator.hook_for(context, operator.build_job(context))

    assert str(raised.value) == (
        f"{argument}: given for Spark Connect connection 'server', whose server's application is started already: "
        "leave them out, or use a spark connection (spark-submit)"
    )


def test_a_memory_buffer_is_refused_in_session_mode_at_task_start(set_connection, serving, spark_tables_home):
    """FLIP-365's memory buffer would live in the server's Python process that runs foreachBatch's function, out of
    the job's reach for its idle and end flushes; the buffer in the state store is not refused."""
    from spark_tables.operators.aggregation import SparkStreamingAggregationOperator
    from tests.unit.test_aggregation_operator import QUERY, SINK

    set_connection("server", conn_type="spark_connect", host="127.0.0.1", port=15002)
    context = task_context()

    def operator(**buffer: object) -> SparkStreamingAggregationOperator:
        return SparkStreamingAggregationOperator(
            task_id="counts", sql=QUERY, sink=SINK, conn_id="server", flush_max_interval="1 min", **buffer
        )

    memory_only = operator(flush_memory_buffer_only=True)
    with pytest.raises(SpecError) as raised:
        memory_only.hook_for(context, memory_only.build_job(context))

    assert str(raised.value) == (
        "execution.flush.memory-buffer-only does not run in session mode: the buffer would live in the Spark Connect "
        "server's Python, where the job cannot flush it: leave it unset (the buffer is then in Spark's state store), "
        "or use a spark connection (spark-submit)"
    )
    logged = operator(flush_durable_store="log")
    assert refused(logged.build_job(context)) == (
        "execution.flush.durable-store=log does not run in session mode: the buffer would live in the Spark Connect "
        "server's Python, where the job cannot flush it: leave it unset (the buffer is then in Spark's state store), "
        "or use a spark connection (spark-submit)"
    )
    assert refused(operator().build_job(context)) is None
    assert refused(operator(flush_durable_store="state-store").build_job(context)) is None


def test_plan_statements_and_lookup_joins_of_a_stream_run_in_session_mode():
    from spark_tables.core.lookup.job import LookupJoinJob
    from spark_tables.core.lookup.table import LookupSpec, SourceTable
    from spark_tables.core.plan.job import PlanJob, PlanOptions
    from spark_tables.tasks.sql_reader import read_plan_statement

    def refusal(statement: str, **configuration: str) -> str | None:
        options = PlanOptions(checkpoints="file:///checkpoints", configuration=configuration)
        return refused(PlanJob(statement=read_plan_statement(statement), options=options))

    for statement in (
        "EXECUTE PLAN 'file:///plans/p.json'",
        "EXPLAIN PLAN 'file:///plans/p.json'",
        "COMPILE PLAN 'file:///plans/p.json' FOR INSERT INTO s SELECT * FROM t",
    ):
        assert refusal(statement) is None
        assert refusal(statement, **{"execution.flush.max-interval": "1 min"}) is None
    memory_only = {"execution.flush.max-interval": "1 min", "execution.flush.memory-buffer-only": "true"}
    assert refusal("EXECUTE PLAN 'file:///plans/p.json'", **memory_only).startswith(
        "execution.flush.memory-buffer-only does not run in session mode"
    )
    assert refusal("EXPLAIN PLAN 'file:///plans/p.json'", **memory_only) is None, "it runs no query"
    assert refused(SqlJob(statements=("SELECT 1",))) is None
    source = SourceTable(kind="postgres", connection={"host": "db"}, table="crm.customers", key=("customer_id",))
    lookup = LookupSpec(name="customers", source=source, options={"lookup.cache": "NONE"}, snapshots="file:///s")
    streaming = LookupJoinJob(
        lookup=lookup,
        on=("customer_id",),
        metrics_uri="file:///m",
        probe_stream={"format": "rate"},
        output="db.enriched",
        checkpoint="file:///checkpoints/enrich",
    )
    assert refused(streaming) is None


class _EndsAfter:
    """A job's end that comes after ``looks`` looks at it."""

    def __init__(self, looks: int) -> None:
        self.looks, self.left = 0, looks

    def wait(self, timeout: float) -> bool:
        self.looks += 1
        return self.looks > self.left


@pytest.mark.parametrize(("stops_at", "interrupts"), [(1, 1), (3, 3)])
def test_a_stopped_job_is_interrupted_again_until_an_interruption_stops_one_of_its_operations(stops_at, interrupts):
    """An operation the job starts after the stop was asked for (between two of its steps) is interrupted too; once
    one was, the job undoes what it made, and its cleanup's operations are left alone until it ends."""
    from spark_tables.hooks.spark_connect_job import stop_job
    from spark_tables.jobs.cancellation import Cancellation

    cancellation, calls = Cancellation(), []

    def interrupt() -> list[str]:
        calls.append("all")
        return ["an operation"] if len(calls) == stops_at else []

    cancellation.interrupt_with(interrupt)
    ended = _EndsAfter(looks=6)

    stopped = stop_job(cancellation, ended, "asked")  # type: ignore[arg-type]

    assert (stopped, cancellation.reason, len(calls), ended.looks) == (True, "asked", interrupts, 7)


def test_a_job_that_noticed_the_stop_between_its_steps_is_not_interrupted_again():
    from spark_tables.hooks.spark_connect_job import stop_job
    from spark_tables.jobs.cancellation import Cancellation, JobCancelled

    cancellation, calls = Cancellation(), []

    def interrupt() -> list[str]:  # nothing runs: the job is between two steps, and checks
        calls.append("all")
        with pytest.raises(JobCancelled):
            cancellation.check()
        return []

    cancellation.interrupt_with(interrupt)

    stop_job(cancellation, _EndsAfter(looks=4), "asked")  # type: ignore[arg-type]

    assert (cancellation.taken_effect, len(calls)) == (True, 1)


def test_a_job_still_running_after_the_grace_is_given_up_and_the_task_stops_waiting(monkeypatch):
    """A server that lost the interrupt of the job's operation runs it on: once the grace has passed the stop returns,
    and the job is marked unstopped, which ends the task's wait for it."""
    from spark_tables.hooks import spark_connect_job
    from spark_tables.jobs.cancellation import Cancellation

    monkeypatch.setattr(spark_connect_job, "CANCEL_GRACE_SECONDS", 0)
    cancellation, calls = Cancellation(), []
    cancellation.interrupt_with(lambda: calls.append("all") or ["the fill"])
    never = _EndsAfter(looks=10**9)
    running = spark_connect_job.RunningJob(cancellation, never)  # type: ignore[arg-type]

    running.stop("asked")

    assert (running.unstopped.is_set(), never.looks, calls) == (True, 1, ["all"])
    assert spark_connect_job.unstopped_error("sc://spark:15002").startswith(
        "the Spark job did not stop within 0 s of the request: the Spark Connect server sc://spark:15002 lost the "
    )


def test_a_jar_given_as_a_url_fails_in_one_line_as_a_session_takes_files_only(set_connection):
    set_connection("server", conn_type="spark_connect", host="spark.example", port=15002)

    with pytest.raises(SpecError, match=r"^jar https://repo.example/pg.jar: a Spark Connect session takes jars from"):
        _hook("server", jars=("/usr/share/java/postgresql.jar", "https://repo.example/pg.jar"))
    assert _hook("server", jars=("/usr/share/java/postgresql.jar",)).jars == ("/usr/share/java/postgresql.jar",)
