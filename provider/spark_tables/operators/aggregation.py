"""Streaming aggregations on Spark's own stateful aggregation, upserted by key into PostgreSQL, a catalog table or
a Kafka topic, their output buffered (FLIP-365) when ``flush_max_interval`` is set."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from airflow.sdk import Context
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.aggregation.result import StreamingAggregationResult
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.core.names import flat_name
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import KafkaUpsertSink, KeyedSink, PostgresUpsertSink
from spark_tables.hooks.kafka import KafkaTopics, kafka_topics
from spark_tables.hooks.postgres import PostgresSinkHook
from spark_tables.operators.streaming import StreamingJobOperator, duration_text
from spark_tables.utils import settings


class SparkStreamingAggregationOperator(StreamingJobOperator):
    """Runs one Spark SQL aggregation over streams as a bounded streaming query, resuming from its checkpoint, and
    upserts each changed group by key into a PostgreSQL table, a catalog table or a Kafka topic.

    With ``flush_max_interval``, each group's result is written at most once per interval: only its latest value,
    and at the end of the run whatever is still buffered. Only FLIP-365's idempotent aggregates may be buffered
    (count, sum, avg, min, max, min_by, max_by, first_value, last_value, listagg, stddev and variance, collect_list,
    collect_set, DISTINCT); any other fails the task before its query starts, naming it.

    XCom gets ``query``: ``batches``, ``input_rows``, the state its operators hold, what the sink wrote
    (``write_calls``, ``rows_upserted``; a Kafka sink's ``messages_sent``), and with buffering ``buffer``:
    ``records_in``, ``records_emitted``, ``flushes`` by cause (``interval``, ``idle``, ``end``, and for a memory
    buffer ``full``), also in the task log.

    :param sql: ``SELECT ... FROM STREAM(table) [WATERMARK column DELAY OF INTERVAL ...] ... GROUP BY ...``: Spark
        SQL, the source tables read as streams; a Kafka topic declared in ``sources`` is read by its name
        (``FROM orders``). A ``window(...)`` column reaches the sink as ``<name>_start`` and
        ``<name>_end``. (templated)
    :param sink: where the results are upserted, by its key (the grouping columns): a ``PostgresUpsertSink``, a
        ``TableUpsertSink`` (a catalog file table, a new version of it per batch that changes it, so best buffered),
        or a ``KafkaUpsertSink`` (a compacted topic, a message a change, by key).
    :param checkpoint: the query's checkpoint folder, kept across runs; default
        ``<[spark_tables] checkpoint_uri>/aggregations/<dag_id>__<task_id>__<map index>__<hash>``, one of its own for
        each task and mapped instance (``default_checkpoint``). (templated)
    """

    template_fields: Sequence[str] = (*StreamingJobOperator.template_fields, "sql", "checkpoint")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **StreamingJobOperator.template_fields_renderers,
        "sql": "sql",
    }
    ui_color = "#f3e8fb"

    def __init__(self, *, sql: str, sink: KeyedSink, checkpoint: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(sink, KeyedSink):
            raise TypeError(
                f"sink must be a PostgresUpsertSink, a TableUpsertSink or a KafkaUpsertSink, not {type(sink).__name__}"
            )
        self.sql = sql
        self.sink = sink
        self.checkpoint = checkpoint

    def build_job(self, context: Context) -> StreamingAggregationJob:
        options = StreamingOptions(  # checked first: a bad option fails before the connection is looked up
            configuration=self.job_configuration(),
            sources=self.sources,
            run_for=duration_text(self.run_for),
            trigger_interval=duration_text(self.trigger_interval),
        )
        checkpoint = self.checkpoint or default_checkpoint(context["ti"])
        job = StreamingAggregationJob(query=self.sql, sink=self.sink, checkpoint=checkpoint, options=options)
        postgres = [self.sink] if isinstance(self.sink, PostgresUpsertSink) else []
        connections = PostgresSinkHook().sink_connections(postgres)
        kafka_sinks = [self.sink] if isinstance(self.sink, KafkaUpsertSink) else []
        kafka = kafka_topics(self.sources, kafka_sinks) if self.reaches_kafka() else KafkaTopics()
        for warning in kafka.warnings:
            self.log.warning("%s", warning)
        return dataclasses.replace(
            job, options=dataclasses.replace(options, connections=connections, kafka_connections=kafka.connections)
        )

    def reaches_kafka(self) -> bool:
        return super().reaches_kafka() or isinstance(self.sink, KafkaUpsertSink)

    def shared_folders(self, job: Any, caches: tuple[CacheUse, ...]) -> dict[str, str]:
        """Besides cached tables': the query's checkpoint, where its executors keep their state."""
        setting = "checkpoint" if self.checkpoint else "[spark_tables] checkpoint_uri"
        return {**super().shared_folders(job, caches), setting: job.checkpoint}

    def xcom_value(self, result: JobResult) -> dict[str, Any]:
        if isinstance(result.output, StreamingAggregationResult):
            self.log_buffer(result.output.query)
        return super().xcom_value(result)


def default_checkpoint(ti: RuntimeTaskInstanceProtocol) -> str:
    """A task instance's own checkpoint folder: its DAG, task and map index, hashed exactly (``flat_name``), so that
    no two tasks share one (``a.b`` + ``c`` and ``a`` + ``b.c``, a task group's ``g.t``) and no two mapped instances do.
    """
    name = flat_name([ti.dag_id, ti.task_id, str(ti.map_index)])
    return f"{settings.checkpoint_uri().rstrip('/')}/aggregations/{name}"
