"""Compiled plans with per-operator state TTL (FLIP-292): compile, explain and execute them as Spark jobs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from spark_tables.core.durations import format_duration
from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.core.plan.flush import MAX_ENTRIES_OPTION, MAX_INTERVAL_OPTION, MEMORY_BUFFER_ONLY_OPTION
from spark_tables.core.plan.job import FORCE_RECOMPILE_OPTION, PlanJob
from spark_tables.core.plan.sinks import PostgresUpsertSink
from spark_tables.hooks.plan import CompiledPlanHook
from spark_tables.operators.spark_job import SparkJobOperator


def _duration_text(value: str | timedelta | None) -> str:
    if value is None:
        return ""
    return format_duration(value) if isinstance(value, timedelta) else str(value)


def _quoted(uri: str) -> str:
    return "'" + uri.replace("'", "''") + "'"


class _PlanOperator(SparkJobOperator):
    """What the plan operators share: the plan's URI, the job-level options, the PostgreSQL sinks, the checkpoints.

    :param plan_uri: the plan file: a path, ``file://`` or object storage (``s3://``). (templated)
    :param configuration: job-level options, Flink's names: ``table.exec.state.ttl`` (every stateful operator's
        default TTL, ``0 ms``: none), ``table.plan.force-recompile``. (templated)
    :param postgres_sinks: ``PostgresUpsertSink`` declarations ``INSERT INTO`` may name.
    :param checkpoints: root of executed plans' checkpoints, a folder per plan; default
        ``[spark_tables] checkpoint_uri``. (templated)
    :param flush_max_interval: ``execution.flush.max-interval`` (FLIP-365): buffer the plan's aggregation results
        and write each key's at most once per interval (``"2 min"``, a timedelta). (templated)
    :param flush_memory_buffer_only: ``execution.flush.memory-buffer-only``.
    :param cache_max_entries: ``state.backend.cache.max-entries-num``, the memory buffer's bound.
    :param run_for: how long an execution keeps its queries running, a micro-batch every ``trigger_interval``
        (``"10 min"``, a timedelta); None: available-now, what the sources hold when it starts. (templated)
    :param trigger_interval: the micro-batch interval of a run with ``run_for``.
    """

    template_fields: Sequence[str] = (
        *SparkJobOperator.template_fields,
        "plan_uri",
        "configuration",
        "checkpoints",
        "flush_max_interval",
        "run_for",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SparkJobOperator.template_fields_renderers,
        "configuration": "json",
    }
    ui_color = "#f3e8fb"

    def __init__(
        self,
        *,
        plan_uri: str,
        configuration: dict[str, Any] | None = None,
        postgres_sinks: Sequence[PostgresUpsertSink] = (),
        checkpoints: str | None = None,
        flush_max_interval: str | timedelta | None = None,
        flush_memory_buffer_only: bool | None = None,
        cache_max_entries: int | None = None,
        run_for: str | timedelta | None = None,
        trigger_interval: str | timedelta = "1 s",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.run_for = run_for
        self.trigger_interval = trigger_interval
        self.plan_uri = plan_uri
        self.flush_max_interval = flush_max_interval
        self.flush_memory_buffer_only = flush_memory_buffer_only
        self.cache_max_entries = cache_max_entries
        self.configuration = configuration
        self.postgres_sinks = tuple(postgres_sinks)
        for sink in self.postgres_sinks:
            if not isinstance(sink, PostgresUpsertSink):
                raise TypeError(f"postgres_sinks must hold PostgresUpsertSink declarations, not {type(sink).__name__}")
        self.checkpoints = checkpoints

    def statement(self) -> str:
        raise NotImplementedError

    def job_configuration(self) -> dict[str, Any]:
        """``configuration`` with the options the operator's own parameters set (each set once, by either)."""
        configuration = dict(self.configuration or {})
        interval = self.flush_max_interval
        for name, value in (
            (MAX_INTERVAL_OPTION, _duration_text(interval) or None),
            (
                MEMORY_BUFFER_ONLY_OPTION,
                None if self.flush_memory_buffer_only is None else self.flush_memory_buffer_only,
            ),
            (MAX_ENTRIES_OPTION, self.cache_max_entries),
        ):
            if value is None:
                continue
            if name in configuration and str(configuration[name]).lower() != str(value).lower():
                raise SpecError(f"{name} is set twice, in configuration and as a parameter: set it once")
            configuration[name] = str(value).lower() if isinstance(value, bool) else value
        return configuration

    def build_job(self, context: Any) -> PlanJob:
        statement = self.statement()
        options = CompiledPlanHook().plan_options(
            [statement],
            self.job_configuration(),
            self.postgres_sinks,
            self.checkpoints,
            run_for=_duration_text(self.run_for),
            trigger_interval=_duration_text(self.trigger_interval),
        )
        return PlanJob(statement=statement, options=options)


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
        explained = result.output.get("explain", {})
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
        for query in result.output.get("execute", {}).get("queries", []):
            buffer = query.get("buffer")
            if buffer:
                self.log.info(
                    "sink %s: %d record(s) in, %d emitted, %d write call(s); flushes: %s",
                    query.get("sink"),
                    buffer["records_in"],
                    buffer["records_emitted"],
                    query.get("write_calls", 0),
                    ", ".join(f"{cause} {count}" for cause, count in buffer["flushes"].items()),
                )
        return super().xcom_value(result)
