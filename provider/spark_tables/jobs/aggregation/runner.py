"""The ``streaming_aggregation`` job: Spark's own streaming aggregation in update mode, each micro-batch's changed
groups upserted into PostgreSQL, or with ``execution.flush.max-interval`` buffered first (FLIP-365), so that each
group's result is written at most once per interval.

Spark computes the aggregation and keeps its state as it does without this provider; the buffer takes the changed
groups of every micro-batch and writes only their latest values when a flush comes. In front of a PostgreSQL sink
it is in the driver, logged in the checkpoint (``plan.durable_buffer``) or in memory only (``plan.memory_buffer``);
otherwise it is a second stateful operator after the aggregation (``streaming.buffer``), keyed by buckets of the sink
key. Spark refuses a stateful operator after an aggregation unless its check for rows that a downstream operator
could drop as late is off (``statefulOperator.checkCorrectness``): the buffer drops no row, late or not, so the
check is turned off for queries buffered in the state store. A
time window (``GROUP BY window(ts, '1 minute')``) reaches the sink as two columns, ``<name>_start`` and
``<name>_end``.
"""

from __future__ import annotations

import logging

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ByteType

from spark_tables.core.aggregation.idempotent import refuse_non_idempotent
from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.aggregation.result import StreamingAggregationResult
from spark_tables.core.errors import SpecError, one_line
from spark_tables.core.streaming.flush import MAX_INTERVAL_OPTION, STATE_STORE, buffer_store
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.aggregation.query_tokens import called_names, groups_rows
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.changelog import ROW_KIND, UPDATE_AFTER, quoted
from spark_tables.jobs.session_conf import session_conf
from spark_tables.jobs.session_facts import is_connect
from spark_tables.jobs.streaming.clock import BatchClock, Clock
from spark_tables.jobs.streaming.session_confs import SESSION_CONFS, SHUFFLE_PARTITIONS, state_partitions
from spark_tables.jobs.streaming.sink_queries import PROGRESS_RETENTION, SinkQuery, run_available_now, run_for
from spark_tables.jobs.streaming.sinks.writers import sink_connection, sink_writer
from spark_tables.jobs.streaming.sources.streams import source_views

log = logging.getLogger(__name__)

#: Spark's check that refuses a stateful operator after an aggregation (see the module's docstring).
CORRECTNESS_CHECK = "spark.sql.streaming.statefulOperator.checkCorrectness.enabled"
#: Where Spark's catalog puts the classes of its aggregate functions.
AGGREGATE_PACKAGE = ".expressions.aggregate."
#: The metadata Spark gives a time window's column.
TIME_WINDOW = "spark.timeWindow"


def run_streaming_aggregation(
    spark: SparkSession, job: StreamingAggregationJob, cancellation: Cancellation, clock: Clock | None = None
) -> StreamingAggregationResult:
    """Run the aggregation available-now or for ``run_for``, from its checkpoint; ``clock`` fixes the buffer's
    processing time (default: each micro-batch's)."""
    options = job.options
    with (
        session_conf(spark, aggregation_confs(spark, job)),
        source_views(spark, options.sources, options.kafka_connections),
    ):
        query = aggregation_query(spark, job, clock or BatchClock())
        if options.run_for_ms:
            run_for([query], options.run_for_ms, options.trigger_interval_ms, cancellation)
        else:
            run_available_now([query], cancellation)
    return StreamingAggregationResult(query=query.report())


def aggregation_confs(spark: SparkSession, job: StreamingAggregationJob) -> dict[str, str]:
    """The session settings the job's query runs with."""
    options = job.options
    confs = {**SESSION_CONFS, SHUFFLE_PARTITIONS: str(state_partitions(spark, options.state_partitions))}
    postgres = isinstance(job.sink, PostgresUpsertSink)
    if options.flush.enabled and buffer_store(options.flush, job.sink.name, postgres, is_connect(spark)) == STATE_STORE:
        confs[CORRECTNESS_CHECK] = "false"
    if options.run_for_ms:
        confs[PROGRESS_RETENTION] = str(min(100_000, 100 + options.run_for_ms // options.trigger_interval_ms))
    return confs


def aggregation_query(spark: SparkSession, job: StreamingAggregationJob, clock: Clock) -> SinkQuery:
    """The job's query into its sink, through its buffer when it has one; ``SpecError`` before any query starts
    when the query cannot run or cannot be buffered."""
    flush = job.options.flush
    aggregation = streaming_frame(spark, job.query)
    if flush.enabled:
        check_idempotent(spark, job.query)
    changes = flat_windows(aggregation).withColumn(ROW_KIND, F.lit(UPDATE_AFTER).cast(ByteType()))
    writer = sink_writer(job.sink, connection=sink_connection(job.sink, job.options))
    query = SinkQuery(f"aggregation_{job.sink.name}", changes, writer, job.checkpoint, output_mode="update")
    if flush.enabled:
        query.buffer_output(flush, clock)
    return query


def streaming_frame(spark: SparkSession, query: str) -> DataFrame:
    """The query's frame, which must read a stream; ``SpecError`` (one line) when Spark cannot analyse it."""
    try:
        frame = spark.sql(query)
    except AnalysisException as err:
        raise SpecError(f"streaming aggregation: {one_line(err)}") from None
    if not frame.isStreaming:
        raise SpecError("streaming aggregation: the query reads no stream: read its source tables as STREAM(table)")
    return frame


def flat_windows(frame: DataFrame) -> DataFrame:
    """``frame`` with each time window (a struct a table cannot take) as two columns, ``<name>_start`` and
    ``<name>_end``; the end keeps the watermark's mark, so that the buffer orders its flushes by it."""
    columns = []
    for field in frame.schema.fields:
        if not (field.metadata or {}).get(TIME_WINDOW):
            columns.append(quoted(field.name))
            continue
        marks = {key: value for key, value in field.metadata.items() if key != TIME_WINDOW}
        columns.append(quoted(field.name).getField("start").alias(f"{field.name}_start"))
        columns.append(quoted(field.name).getField("end").alias(f"{field.name}_end", metadata=marks))
    return frame.select(*columns)


def check_idempotent(spark: SparkSession, query: str) -> None:
    """``SpecError`` unless the query is a grouping whose every aggregate function is on FLIP-365's list: which
    of the names it calls are aggregates, Spark's catalog says."""
    if not groups_rows(query):
        raise SpecError(
            f"streaming aggregation: {MAX_INTERVAL_OPTION} buffers an aggregation's results, but the query has no "
            "GROUP BY (or DISTINCT), so each of its rows counts: aggregate it, or run without "
            f"{MAX_INTERVAL_OPTION}"
        )
    aggregates = [
        name
        for name in called_names(query)
        if spark.catalog.functionExists(name) and AGGREGATE_PACKAGE in (spark.catalog.getFunction(name).className or "")
    ]
    refuse_non_idempotent(aggregates, "streaming aggregation")
    log.info("buffered aggregates: %s", ", ".join(aggregates) or "none (DISTINCT)")
