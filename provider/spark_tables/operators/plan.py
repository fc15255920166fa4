"""Compiled plans with per-operator state TTL (FLIP-292): compile, explain and execute them as Spark jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import Context

from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.core.plan.job import FORCE_RECOMPILE_OPTION, PlanJob
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.streaming.sinks import (
    KafkaUpsertSink,
    PostgresUpsertSink,
    TableUpsertSink,
    declared_catalog_sinks,
)
from spark_tables.hooks.plan import CompiledPlanHook
from spark_tables.operators.streaming import StreamingJobOperator, duration_text
from spark_tables.tasks.sql_reader import read_plan_statement


def _quoted(uri: str) -> str:
    return "'" + uri.replace("'", "''") + "'"


class _PlanOperator(StreamingJobOperator):
    """What the plan operators share: the plan's URI, the PostgreSQL and Kafka sinks, the Kafka sources, the
    checkpoints, and the job-level options, buffered output and run time of ``StreamingJobOperator``.

    :param plan_uri: the plan file: a path, ``file://`` or object storage (``s3://``). (templated)
    :param configuration: job-level options, Flink's names: ``table.exec.state.ttl`` (every stateful operator's
        default TTL, ``0 ms``: none), ``table.plan.force-recompile``, FLIP-365's. (templated)
    :param postgres_sinks: ``PostgresUpsertSink`` declarations ``INSERT INTO`` may name, and the only PostgreSQL
        sinks an executed plan may write, each as declared.
    :param catalog_sinks: the catalog tables an executed plan may write: a name (``db.table``) for a table the plan
        appends to, a ``TableUpsertSink`` for one kept equal to an updating result by key (an ``INSERT INTO`` it names
        compiles into an upsert by that key); a plan file that writes another fails the task before any query.
    :param kafka_sinks: ``KafkaUpsertSink`` declarations ``INSERT INTO`` may name (upsert-kafka: a compacted topic
        kept by key), and the only Kafka sinks an executed plan may write, each as declared; a topic that is not
        compacted is a warning in the task log and in EXPLAIN.
    :param sources: ``KafkaTopicSource`` declarations of the Kafka topics the SQL reads (``FROM orders``), and the
        only Kafka sources an explained or executed plan may read, each as declared.
    :param checkpoints: root of executed plans' checkpoints, a folder per plan; default
        ``[spark_tables] checkpoint_uri``. (templated)
    """

    template_fields: Sequence[str] = (*StreamingJobOperator.template_fields, "plan_uri", "checkpoints")
    ui_color = "#f3e8fb"

    def __init__(
        self,
        *,
        plan_uri: str,
        postgres_sinks: Sequence[PostgresUpsertSink] = (),
        catalog_sinks: Sequence[str | TableUpsertSink] = (),
        kafka_sinks: Sequence[KafkaUpsertSink] = (),
        checkpoints: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan_uri = plan_uri
        self.postgres_sinks = tuple(postgres_sinks)
        self.catalog_sinks = declared_catalog_sinks(catalog_sinks)
        self.kafka_sinks = tuple(kafka_sinks)
        for name, sinks, kind in (
            ("postgres_sinks", self.postgres_sinks, PostgresUpsertSink),
            ("kafka_sinks", self.kafka_sinks, KafkaUpsertSink),
        ):
            for sink in sinks:
                if not isinstance(sink, kind):
                    raise TypeError(f"{name} must hold {kind.__name__} declarations, not {type(sink).__name__}")
        self.checkpoints = checkpoints

    def statement(self) -> str:
        raise NotImplementedError

    def build_job(self, context: Context) -> PlanJob:
        statement = read_plan_statement(self.statement())
        options = CompiledPlanHook().plan_options(
            [statement],
            self.job_configuration(),
            self.postgres_sinks,
            self.checkpoints,
            run_for=duration_text(self.run_for),
            trigger_interval=duration_text(self.trigger_interval),
            catalog_sinks=self.catalog_sinks,
            sources=self.sources,
            kafka_sinks=self.kafka_sinks,
        )
        if statement.action != "explain":  # EXPLAIN's own warnings hold them, and go to the log with the graph
            for warning in options.sink_warnings:
                self.log.warning("%s", warning)
        return PlanJob(statement=statement, options=options)

    def reaches_kafka(self) -> bool:
        return super().reaches_kafka() or bool(self.kafka_sinks)

    def shared_folders(self, job: Any, caches: tuple[CacheUse, ...]) -> dict[str, str]:
        """Besides cached tables': the checkpoints, where an executed plan's executors keep their state."""
        folders = super().shared_folders(job, caches)
        if job.statement.executes:
            folders["checkpoints" if self.checkpoints else "[spark_tables] checkpoint_uri"] = job.options.checkpoints
        return folders


class SparkCompilePlanOperator(_PlanOperator):
    """``COMPILE PLAN``: compile streaming INSERT statements into a JSON plan a person can review and edit.

    Every stateful operator (deduplication, aggregation, each side of a join) gets a ``state`` entry with its TTL:
    ``table.exec.state.ttl``, or a ``/*+ STATE_TTL('table' = '1d') */`` hint's. XCom gets ``compile``:
    ``written``, ``kept_existing``, ``replaced``, ``nodes``.

    :param sql: one ``INSERT INTO ... SELECT ...``, or a list of them (compiled as one statement set). (templated)
    :param if_not_exists: keep an existing plan file as it is (with its edits) instead of failing.
    :param overwrite: replace an existing plan file (``table.plan.force-recompile``).
    :param execute: then execute the plan (``COMPILE AND EXECUTE PLAN``: an existing plan is kept and executed).
    """

    template_fields: Sequence[str] = (*_PlanOperator.template_fields, "sql")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {**_PlanOperator.template_fields_renderers, "sql": "sql"}

    def __init__(
        self,
        *,
        sql: str | Sequence[str],
        if_not_exists: bool = False,
        overwrite: bool = False,
        execute: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sql = sql
        self.if_not_exists = if_not_exists
        self.overwrite = overwrite
        self.execute_plan = execute

    def job_configuration(self) -> dict[str, Any]:
        configuration = super().job_configuration()
        if self.overwrite:
            configuration[FORCE_RECOMPILE_OPTION] = "true"
        return configuration

    def statement(self) -> str:
        inserts = [self.sql] if isinstance(self.sql, str) else list(self.sql)
        body = inserts[0] if len(inserts) == 1 else "STATEMENT SET BEGIN\n" + ";\n".join(inserts) + ";\nEND"
        verb = "COMPILE AND EXECUTE PLAN" if self.execute_plan else "COMPILE PLAN"
        exists = " IF NOT EXISTS" if self.if_not_exists and not self.execute_plan else ""
        return f"{verb}{exists} {_quoted(self.plan_uri)} FOR {body}"


class SparkExplainPlanOperator(_PlanOperator):
    """``EXPLAIN PLAN``: check a plan against the catalog without running it, and show its node graph with each
    operator's state TTL.

    XCom gets ``explain``: ``nodes`` (id, type, version, inputs, description, output_schema, and ``state`` with each
    input's ``ttl``, ``ttl_ms`` and whether it comes from the plan or the job), ``edges``, ``sources``, ``sinks``,
    ``warnings`` (operators whose TTL is shorter than one upstream) and ``text``, also written to the task log.
    """

    def statement(self) -> str:
        return f"EXPLAIN PLAN {_quoted(self.plan_uri)}"

    def xcom_value(self, result: JobResult) -> dict[str, Any]:
        explained = (result.output.explain if isinstance(result.output, PlanResult) else None) or {}
        self.log.info("%s", explained.get("text", ""))
        for warning in explained.get("warnings", []):
            self.log.warning("%s", warning)
        return super().xcom_value(result)


class SparkExecutePlanOperator(_PlanOperator):
    """``EXECUTE PLAN``: run a compiled plan's streaming queries over what their sources hold now (available-now),
    resuming from the plan's checkpoint, with each operator's TTL as the plan says.

    XCom gets ``execute``: per sink query its ``batches``, ``input_rows``, the state its operators hold, and what
    the sink wrote; with ``flush_max_interval``, also ``buffer``: records in, records emitted, flushes by cause.

    :param if_exists: succeed doing nothing when the plan file does not exist.
    """

    def __init__(self, *, if_exists: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.if_exists = if_exists

    def statement(self) -> str:
        return f"EXECUTE PLAN{' IF EXISTS' if self.if_exists else ''} {_quoted(self.plan_uri)}"

    def xcom_value(self, result: JobResult) -> dict[str, Any]:
        executed = (result.output.execute if isinstance(result.output, PlanResult) else None) or {}
        for query in executed.get("queries", []):
            self.log_buffer(query)
        return super().xcom_value(result)
