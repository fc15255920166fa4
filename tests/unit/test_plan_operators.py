"""The Airflow side of compiled plans: the statement each operator writes, the job it builds, the connections of
the PostgreSQL sinks a plan writes (from the declared sinks and the plan file), and bad input failing first."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.core.plan.job import PlanJob
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.streaming.flush import FlushOptions
from spark_tables.core.streaming.sinks import KafkaUpsertSink, PostgresUpsertSink, TableUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.operators.plan import SparkCompilePlanOperator, SparkExecutePlanOperator, SparkExplainPlanOperator
from spark_tables.operators.sql import SparkSqlJobOperator
from tests.unit.task_context import task_context
from tests.unit.test_plan_document import example_2

pytestmark = pytest.mark.usefixtures("spark_tables_home")

COUNTS = PostgresUpsertSink(name="counts", conn_id="serving", table="public.counts", key=("cid",))
#: The sink ``example_2()``'s plan file writes, as a task declares it.
PLAN_COUNTS = PostgresUpsertSink(name="counts", conn_id="pg", table="counts", key=("cid",))
INSERT = "INSERT INTO counts SELECT cid, COUNT(*) AS n FROM orders GROUP BY cid"


@pytest.fixture
def serving(serving: None, set_connection: Any) -> None:
    """conftest's ``serving``, and a second PostgreSQL connection ``pg``."""
    set_connection("pg", conn_type="postgres", host="other", schema="o", login="x")


def test_compile_writes_flinks_statement(serving: None) -> None:
    operator = SparkCompilePlanOperator(task_id="c", plan_uri="s3://p/it's.json", sql=INSERT, postgres_sinks=[COUNTS])
    job = operator.build_job(task_context())

    assert isinstance(job, PlanJob)
    assert job.statement.text == f"COMPILE PLAN 's3://p/it''s.json' FOR {INSERT}"
    assert job.options.postgres_sinks == (COUNTS,) and job.options.connections == {}  # compiling writes nowhere
    assert job.options.checkpoints.endswith("spark_tables_home/checkpoints")


def test_a_list_of_inserts_is_a_statement_set_and_overwrite_forces_the_recompile(serving: None) -> None:
    operator = SparkCompilePlanOperator(
        task_id="c", plan_uri="/p.json", sql=[INSERT, INSERT.replace("counts", "counts2")], overwrite=True
    )
    job = operator.build_job(task_context())

    assert job.statement.text.startswith("COMPILE PLAN '/p.json' FOR STATEMENT SET BEGIN\nINSERT INTO counts ")
    assert job.statement.text.endswith(";\nEND")
    assert job.options.configuration == {"table.plan.force-recompile": "true"}
    kept = SparkCompilePlanOperator(task_id="c", plan_uri="/p.json", sql=INSERT, if_not_exists=True)
    assert kept.build_job(task_context()).statement.text.startswith("COMPILE PLAN IF NOT EXISTS '/p.json' FOR INSERT")


def test_executing_resolves_the_connections_of_the_declared_sinks(serving: None, tmp_path: Path) -> None:
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(example_2()))  # its sink "counts" writes through connection "pg"
    operator = SparkExecutePlanOperator(
        task_id="e",
        plan_uri=str(plan_file),
        postgres_sinks=[PostgresUpsertSink(name="other", conn_id="serving", table="t", key=("k",)), PLAN_COUNTS],
        configuration={"table.exec.state.ttl": "1 h"},
    )
    job = operator.build_job(task_context())

    assert job.statement.text == f"EXECUTE PLAN '{plan_file}'"
    assert job.options.connections == {
        "other": {"connect_timeout": 10, "host": "db", "port": 6432, "dbname": "srv", "user": "w", "password": "pw"},
        "counts": {"connect_timeout": 10, "host": "other", "port": 5432, "dbname": "o", "user": "x"},
    }
    assert "pw" not in repr(job)
    compile_and_execute = SparkCompilePlanOperator(
        task_id="c", plan_uri=str(plan_file), sql=INSERT, postgres_sinks=[PLAN_COUNTS], execute=True
    )
    assert set(compile_and_execute.build_job(task_context()).options.connections) == {"counts"}


@pytest.mark.parametrize(
    ("declared", "error"),
    [
        ((), "which the task does not declare: add it to postgres_sinks, or compile the plan again"),
        (
            (dataclasses.replace(PLAN_COUNTS, conn_id="serving"),),
            "but the task declares it as connection 'serving', table counts, key ['cid']: compile the plan again, or "
            "declare the sink as the plan has it",
        ),
        ((dataclasses.replace(PLAN_COUNTS, table="public.other"),), "but the task declares it as connection 'pg'"),
        ((dataclasses.replace(PLAN_COUNTS, key=("cid", "day")),), "key ['cid', 'day']: compile the plan again"),
    ],
)
def test_an_executed_plan_writes_only_to_sinks_the_task_declares_as_it_declares_them(
    nothing_is_started: None, serving: None, tmp_path: Path, declared: tuple, error: str
) -> None:
    """A plan file is edited by people: one that names another connection, table or key than the task declares
    widens what the task may write, and is refused in one line before any job."""
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(example_2()))
    operator = SparkExecutePlanOperator(task_id="e", plan_uri=str(plan_file), postgres_sinks=list(declared))

    with pytest.raises(AirflowFailException) as caught:
        operator.execute(task_context())

    message = str(caught.value)
    assert "\n" not in message and error in message
    assert f"plan {plan_file} writes PostgreSQL sink 'counts'" in message


def test_an_executed_plan_writes_only_the_catalog_tables_the_task_declares(
    nothing_is_started: None, serving: None, tmp_path: Path
) -> None:
    """A plan file edited to write another catalog table than the task meant is refused before any job."""
    plan = example_2()
    plan["sinks"] = [{"name": "sales.counts", "kind": "table-upsert", "key": ["cid"]}]
    for node in plan["nodes"]:
        if node["type"] == "stream-exec-sink":
            node["sink"] = "sales.counts"
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(plan))

    undeclared = SparkExecutePlanOperator(task_id="e", plan_uri=str(plan_file), catalog_sinks=["sales.other"])
    with pytest.raises(AirflowFailException) as caught:
        undeclared.execute(task_context())
    assert str(caught.value) == (
        f"plan {plan_file} writes keyed catalog sink 'sales.counts' (key ['cid']), which the task does not declare: "
        "add it to catalog_sinks, or compile the plan again"
    )
    # Declared by name only, the table would be appended to: the key must be declared as the plan has it.
    other_key = SparkExecutePlanOperator(
        task_id="e", plan_uri=str(plan_file), catalog_sinks=["sales.counts", TableUpsertSink("sales.counts", ["id"])]
    )
    with pytest.raises(AirflowFailException) as caught:
        other_key.execute(task_context())
    assert str(caught.value) == (
        f"plan {plan_file} writes keyed catalog sink 'sales.counts' as key ['cid'], but the task declares it as key "
        "['id']: compile the plan again, or declare the sink as the plan has it"
    )
    declared = SparkExecutePlanOperator(
        task_id="e", plan_uri=str(plan_file), catalog_sinks=[TableUpsertSink("sales.counts", ["cid"])]
    )
    options = declared.build_job(task_context()).options
    assert (options.connections, options.table_upsert_sinks) == ({}, (TableUpsertSink("sales.counts", ["cid"]),))


def test_an_executed_plan_writes_only_the_kafka_sinks_the_task_declares_as_it_declares_them(
    nothing_is_started: None, serving: None, tmp_path: Path
) -> None:
    """A plan file edited to send a topic's messages elsewhere is refused before any connection is looked up."""
    plan = example_2()
    plan["sinks"] = [KafkaUpsertSink("counts", "shop.counts", key=("cid",)).to_dict()]
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(plan))
    as_planned = "connection 'kafka_default', topic shop.counts, key ['cid']"

    elsewhere = KafkaUpsertSink("counts", "audit.counts", key=("cid",))
    refusals = {
        (): f"plan {plan_file} writes Kafka sink 'counts' ({as_planned}), which the task does not declare: add it "
        "to kafka_sinks, or compile the plan again",
        (elsewhere,): f"plan {plan_file} writes Kafka sink 'counts' as {as_planned}, but the task declares it as "
        "connection 'kafka_default', topic audit.counts, key ['cid']: compile the plan again, or declare the sink as "
        "the plan has it",
    }
    for declared, refusal in refusals.items():
        operator = SparkExecutePlanOperator(task_id="e", plan_uri=str(plan_file), kafka_sinks=declared)
        with pytest.raises(AirflowFailException) as caught:
            operator.execute(task_context())
        assert str(caught.value) == refusal
    with pytest.raises(TypeError, match=r"^kafka_sinks must hold KafkaUpsertSink declarations, not PostgresUpsertSink"):
        SparkExecutePlanOperator(task_id="e", plan_uri="p.json", kafka_sinks=[PLAN_COUNTS])


def test_catalog_sinks_take_names_and_keyed_declarations_only(nothing_is_started: None) -> None:
    with pytest.raises(TypeError, match=r"^catalog_sinks must hold table names and TableUpsertSink declarations, not"):
        SparkExecutePlanOperator(task_id="e", plan_uri="p.json", catalog_sinks=[("sales.counts", "cid")])


@pytest.mark.parametrize(
    ("where", "name", "nearest"),
    [
        ("operator", "table.exec.state-ttl", "table.exec.state.ttl"),
        ("operator", "execution.flush.max_interval", "execution.flush.max-interval"),
        ("plan", "table.exec.state.tll", "table.exec.state.ttl"),
    ],
)
def test_an_unknown_option_is_refused_naming_the_nearest_known_one(
    nothing_is_started: None, serving: None, tmp_path: Path, where: str, name: str, nearest: str
) -> None:
    """A misspelt table.exec.state.ttl would keep state for ever, silently."""
    plan = example_2()
    if where == "plan":
        plan["configuration"] = {name: "1 h"}
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(plan))
    configuration = {name: "1 h"} if where == "operator" else {}
    operator = SparkExecutePlanOperator(
        task_id="e", plan_uri=str(plan_file), postgres_sinks=[PLAN_COUNTS], configuration=configuration
    )

    with pytest.raises(AirflowFailException) as caught:
        operator.execute(task_context())

    assert f"{name!r} is not an option this provider knows: did you mean {nearest!r}?" in str(caught.value)


def test_only_executing_a_plan_shares_its_checkpoints_with_the_executors(serving: None, tmp_path: Path) -> None:
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(example_2()))
    compile_plan = SparkCompilePlanOperator(task_id="c", plan_uri=str(plan_file), sql=INSERT)
    execute = SparkExecutePlanOperator(task_id="e", plan_uri=str(plan_file), postgres_sinks=[PLAN_COUNTS])
    own = SparkExecutePlanOperator(
        task_id="e", plan_uri=str(plan_file), checkpoints="file:///shared/checkpoints", postgres_sinks=[PLAN_COUNTS]
    )

    assert compile_plan.shared_folders(compile_plan.build_job(task_context()), ()) == {}
    [(setting, folder)] = execute.shared_folders(execute.build_job(task_context()), ()).items()
    assert setting == "[spark_tables] checkpoint_uri" and folder.endswith("spark_tables_home/checkpoints")
    assert own.shared_folders(own.build_job(task_context()), ()) == {"checkpoints": "file:///shared/checkpoints"}


def test_a_sinks_missing_connection_fails_the_task_before_any_job(nothing_is_started: None, tmp_path: Path) -> None:
    operator = SparkExecutePlanOperator(
        task_id="e", plan_uri=str(tmp_path / "none.json"), if_exists=True, postgres_sinks=[COUNTS]
    )
    assert operator.statement() == f"EXECUTE PLAN IF EXISTS '{tmp_path / 'none.json'}'"
    with pytest.raises(AirflowFailException, match="postgres sink counts: connection 'serving' does not exist"):
        operator.execute(task_context())


def test_a_bad_plan_file_fails_in_one_line_before_any_job(nothing_is_started: None, tmp_path: Path) -> None:
    plan_file = tmp_path / "p.json"
    document = example_2()
    document["format_version"] = 2
    plan_file.write_text(json.dumps(document))
    with pytest.raises(AirflowFailException, match=r"format version 2, newer than this provider reads \(1\)"):
        SparkExecutePlanOperator(task_id="e", plan_uri=str(plan_file)).execute(task_context())


def test_explain_logs_the_graph_and_its_warnings(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_tables.core.job_result import JobResult

    monkeypatch.setattr(SparkExplainPlanOperator, "log", logging.getLogger("explain_test"))
    result = JobResult(
        kind="plan",
        output={
            "action": "explain",
            "plan_uri": "/p.json",
            "explain": {"text": "== Compiled plan ==\n[1] ...", "warnings": ["node 4 keeps ..."]},
        },
    )
    operator = SparkExplainPlanOperator(task_id="x", plan_uri="/p.json")
    assert operator.statement() == "EXPLAIN PLAN '/p.json'"
    with caplog.at_level(logging.INFO, logger="explain_test"):
        value = operator.xcom_value(result)
    assert value["explain"]["warnings"] == ["node 4 keeps ..."]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "== Compiled plan ==\n[1] ..."),
        ("WARNING", "node 4 keeps ..."),
    ]


def test_the_flush_parameters_set_flip_365s_options(serving: None, tmp_path: Path) -> None:
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(example_2()))
    operator = SparkExecutePlanOperator(
        task_id="e",
        plan_uri=str(plan_file),
        postgres_sinks=[PLAN_COUNTS],
        configuration={"table.exec.state.ttl": "1 h"},
        flush_max_interval=timedelta(minutes=2),
        flush_memory_buffer_only=False,
        cache_max_entries=500,
        run_for=timedelta(minutes=10),
        trigger_interval="2 s",
    )
    options = operator.build_job(task_context()).options
    assert (options.run_for_ms, options.trigger_interval_ms) == (600_000, 2000)
    assert options.configuration == {
        "table.exec.state.ttl": "1 h",
        "execution.flush.max-interval": "120000 ms",
        "execution.flush.memory-buffer-only": "false",
        "state.backend.cache.max-entries-num": "500",
    }
    assert options.flush == FlushOptions(timedelta(minutes=2), False, 500)


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"flush_max_interval": "soon"}, "execution.flush.max-interval"),
        (
            {"flush_max_interval": "1 min", "configuration": {"execution.flush.max-interval": "2 min"}},
            "execution.flush.max-interval is set twice, in configuration and as a parameter: set it once",
        ),
        ({"cache_max_entries": 10}, "state.backend.cache.max-entries-num applies to buffered output"),
    ],
)
def test_bad_flush_parameters_fail_the_task_before_any_job(
    nothing_is_started: None, tmp_path: Path, parameters: dict[str, Any], message: str
) -> None:
    plan_file = tmp_path / "p.json"
    plan_file.write_text(json.dumps(example_2()))
    operator = SparkExecutePlanOperator(task_id="e", plan_uri=str(plan_file), **parameters)
    with pytest.raises(AirflowFailException, match=re.escape(message)):
        operator.execute(task_context())


def test_execute_logs_what_each_buffer_did(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SparkExecutePlanOperator, "log", logging.getLogger("execute_test"))
    buffer = {
        "store": "state-store",
        "records_in": 900,
        "records_emitted": 12,
        "flushes": {"interval": 2, "idle": 0, "end": 1},
    }
    result = JobResult(
        kind="plan",
        output={
            "action": "execute",
            "plan_uri": "/p.json",
            "execute": {"queries": [{"sink": "counts", "write_calls": 3, "buffer": buffer}, {"sink": "other"}]},
        },
    )
    with caplog.at_level(logging.INFO, logger="execute_test"):
        SparkExecutePlanOperator(task_id="e", plan_uri="/p.json").xcom_value(result)
    assert [r.getMessage() for r in caplog.records] == [
        "sink counts: 900 record(s) in, 12 emitted, 3 write call(s); flushes: interval 2, idle 0, end 1; buffered in "
        "the state-store"
    ]


def test_the_sql_operator_runs_plan_statements_with_the_plans_options(serving: None, tmp_path: Path) -> None:
    operator = SparkSqlJobOperator(
        task_id="s",
        sql=f"CREATE TABLE x (a INT) USING json; COMPILE AND EXECUTE PLAN '{tmp_path}/p.json' FOR {INSERT};",
        postgres_sinks=[COUNTS],
        plan_configuration={"table.exec.state.ttl": "20 s"},
    )
    job = operator.build_job(task_context())

    assert isinstance(job, SqlJob) and len(job.statements) == 2
    assert job.plans is not None and set(job.plans.connections) == {"counts"}
    assert job.plans.configuration == {"table.exec.state.ttl": "20 s"}
    with pytest.raises(SpecError, match=r"SELECT 1 is not an INSERT: a compiled plan writes its results"):
        SparkSqlJobOperator(task_id="s", sql="SELECT 1; COMPILE PLAN '/p.json' FOR SELECT 1").build_job(task_context())
    plain = SparkSqlJobOperator(task_id="s", sql="SELECT 1").build_job(task_context())
    assert plain.plans is None


ORDERS = KafkaTopicSource("orders", "shop.orders", "id INT, cid INT")


def _reading_orders_from_kafka(plan_file: Path, source: KafkaTopicSource = ORDERS) -> None:
    document = example_2()
    document["nodes"][0]["source"] = source.to_dict()
    plan_file.write_text(json.dumps(document))


@pytest.mark.parametrize(
    ("declared", "operator_class"),
    [
        ((), SparkExecutePlanOperator),
        ((dataclasses.replace(ORDERS, conn_id="kafka_other"),), SparkExecutePlanOperator),
        ((dataclasses.replace(ORDERS, on_malformed="skip"),), SparkExplainPlanOperator),
    ],
)
def test_an_explained_or_executed_plan_reads_only_the_kafka_sources_the_task_declares_as_it_declares_them(
    nothing_is_started: None, serving: None, tmp_path: Path, declared: tuple, operator_class: type
) -> None:
    """A plan file edited to read another topic, or through another connection, is refused in one line before any
    connection is looked up."""
    plan_file = tmp_path / "p.json"
    _reading_orders_from_kafka(plan_file)
    operator = operator_class(task_id="e", plan_uri=str(plan_file), postgres_sinks=[PLAN_COUNTS], sources=declared)
    with pytest.raises(AirflowFailException) as caught:
        operator.execute(task_context())
    assert str(caught.value).endswith(
        f"plan {plan_file} reads kafka source 'orders' (topic shop.orders, connection 'kafka_default'), which the task "
        "does not declare as such: declare it in sources, or compile the plan again"
    )


@pytest.mark.parametrize(
    ("connection", "error"),
    [
        (None, "kafka source orders: connection 'kafka_default' does not exist: create it (type kafka: its extra"),
        (
            {"conn_type": "postgres", "host": "db"},
            "kafka source orders: connection 'kafka_default' is of type 'postgres'",
        ),
        (
            {"conn_type": "kafka", "extra": {"bootstrap.servers": "b:9092", "fetch.wait.max.ms": 5}},
            "kafka connection 'kafka_default': setting 'fetch.wait.max.ms' has no counterpart",
        ),
    ],
)
def test_a_kafka_sources_missing_or_wrong_connection_fails_the_task_before_any_job(
    nothing_is_started: None,
    set_connection: Any,
    tmp_path: Path,
    connection: dict[str, Any] | None,
    error: str,
) -> None:
    if connection is not None:
        set_connection("kafka_default", **connection)
    operator = SparkCompilePlanOperator(task_id="c", plan_uri=str(tmp_path / "p.json"), sql=INSERT, sources=ORDERS)
    assert operator.connector_jars(None)[0].endswith("spark-sql-kafka-0-10_2.13.jar"), "Spark's Kafka connector"
    with pytest.raises(AirflowFailException) as caught:
        operator.execute(task_context())
    assert error in str(caught.value) and "\n" not in str(caught.value)


def test_sources_take_kafka_topic_declarations_only(nothing_is_started: None) -> None:
    with pytest.raises(TypeError, match="sources must hold KafkaTopicSource declarations, not str"):
        SparkCompilePlanOperator(task_id="c", plan_uri="/p.json", sql=INSERT, sources=["orders"])
