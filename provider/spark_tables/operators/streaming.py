"""What the operators of bounded streaming jobs share: job-level options, FLIP-365's buffered output as parameters,
how long a run lasts, and the task log line of what each buffer did."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar

from spark_tables.core.durations import format_duration
from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS
from spark_tables.core.streaming.flush import (
    DURABLE_STORE_OPTION,
    MAX_ENTRIES_OPTION,
    MAX_INTERVAL_OPTION,
    MEMORY_BUFFER_ONLY_OPTION,
)
from spark_tables.core.streaming.sources import KafkaTopicSource, declared_sources
from spark_tables.operators.spark_job import SparkJobOperator


def duration_text(value: str | timedelta | None) -> str:
    """A duration parameter as the job reads it: text as given, a timedelta in milliseconds, None as empty."""
    if value is None:
        return ""
    return format_duration(value) if isinstance(value, timedelta) else str(value)


class StreamingJobOperator(SparkJobOperator):
    """Runs a bounded streaming job: available-now, or for ``run_for``.

    :param configuration: job-level options, Flink's names. (templated)
    :param flush_max_interval: ``execution.flush.max-interval`` (FLIP-365): buffer the aggregation results and
        write each key's at most once per interval (``"2 min"``, a timedelta). (templated)
    :param flush_memory_buffer_only: ``execution.flush.memory-buffer-only``.
    :param flush_durable_store: ``execution.flush.durable-store``: ``log`` or ``state-store``; None: ``log`` in
        front of a PostgreSQL sink in a job of its own, else ``state-store``.
    :param cache_max_entries: ``state.backend.cache.max-entries-num``, the memory buffer's bound.
    :param run_for: how long a run keeps its queries running, a micro-batch every ``trigger_interval``
        (``"10 min"``, a timedelta); None: available-now, what the sources hold when it starts. (templated)
    :param trigger_interval: the micro-batch interval of a run with ``run_for``.
    :param sources: ``KafkaTopicSource`` declarations of the Kafka topics the SQL reads by name (``FROM orders``);
        their topics are looked up on the brokers before any job work; a job per job ships Spark's Kafka connector
        (as for a Kafka sink), in session mode the server must have it on its class path
        (``scripts/connect_server.py``'s does).
    """

    template_fields: Sequence[str] = (
        *SparkJobOperator.template_fields,
        "configuration",
        "flush_max_interval",
        "run_for",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SparkJobOperator.template_fields_renderers,
        "configuration": "json",
    }

    def __init__(
        self,
        *,
        configuration: dict[str, Any] | None = None,
        flush_max_interval: str | timedelta | None = None,
        flush_memory_buffer_only: bool | None = None,
        flush_durable_store: str | None = None,
        cache_max_entries: int | None = None,
        run_for: str | timedelta | None = None,
        trigger_interval: str | timedelta = "1 s",
        sources: KafkaTopicSource | Sequence[KafkaTopicSource] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.sources = declared_sources(sources)
        self.configuration = configuration
        self.flush_max_interval = flush_max_interval
        self.flush_memory_buffer_only = flush_memory_buffer_only
        self.flush_durable_store = flush_durable_store
        self.cache_max_entries = cache_max_entries
        self.run_for = run_for
        self.trigger_interval = trigger_interval

    def connector_jars(self, job: Any) -> list[str]:
        """Spark's Kafka connector, when the task reads or writes Kafka topics."""
        return list(KAFKA_CONNECTOR_JARS) if self.reaches_kafka() else []

    def reaches_kafka(self) -> bool:
        """Whether the task reads or writes Kafka topics: here, whether it reads any."""
        return bool(self.sources)

    def job_configuration(self) -> dict[str, Any]:
        """``configuration`` with the options the operator's own parameters set (each set once, by either)."""
        configuration = dict(self.configuration or {})
        for name, value in (
            (MAX_INTERVAL_OPTION, duration_text(self.flush_max_interval) or None),
            (MEMORY_BUFFER_ONLY_OPTION, self.flush_memory_buffer_only),
            (DURABLE_STORE_OPTION, self.flush_durable_store),
            (MAX_ENTRIES_OPTION, self.cache_max_entries),
        ):
            if value is None:
                continue
            if name in configuration and str(configuration[name]).lower() != str(value).lower():
                raise SpecError(f"{name} is set twice, in configuration and as a parameter: set it once")
            configuration[name] = str(value).lower() if isinstance(value, bool) else value
        return configuration

    def log_buffer(self, query: dict[str, Any]) -> None:
        """One task log line of what a sink query's buffer did, when it had one."""
        buffer = query.get("buffer")
        if buffer:
            self.log.info(
                "sink %s: %d record(s) in, %d emitted, %d write call(s); flushes: %s; buffered in the %s",
                query.get("sink"),
                buffer["records_in"],
                buffer["records_emitted"],
                query.get("write_calls", 0),
                ", ".join(f"{cause} {count}" for cause, count in buffer["flushes"].items()),
                buffer.get("store"),
            )
