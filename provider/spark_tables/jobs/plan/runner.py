"""The ``plan`` job: compile a plan file, explain one, or execute one as bounded streaming queries.

Executing runs each sink's query available-now (it processes what its sources hold, then ends) or for a time
(``sink_queries``), resuming from the plan's checkpoint the next time. A plan executed again after its TTLs were
edited resumes from the same checkpoint, and the edited TTLs apply to the state already kept (each entry keeps its
last write time).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pyspark.sql import SparkSession

from spark_tables.core.errors import SpecError
from spark_tables.core.names import flat_name
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.explain import explain, explain_text
from spark_tables.core.plan.idempotence import buffered_aggregation
from spark_tables.core.plan.implementations import TRANSFORM_WITH_STATE
from spark_tables.core.plan.job import PlanJob, PlanOptions
from spark_tables.core.plan.nodes import Sink
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.plan.state import default_ttl
from spark_tables.core.plan.statements import PlanStatement
from spark_tables.core.streaming.sinks import KeyedSink
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.plan.checkpoint_implementations import (
    check_implementations,
    node_implementations,
    record_implementations,
)
from spark_tables.jobs.plan.compiler import compile_plan
from spark_tables.jobs.plan.pipeline import Pipeline
from spark_tables.jobs.plan.plan_files import plan_exists, read_plan_text, write_plan_text
from spark_tables.jobs.plan.spark_join import WATERMARK_DELAY
from spark_tables.jobs.session_conf import session_conf
from spark_tables.jobs.streaming.clock import BatchClock, Clock
from spark_tables.jobs.streaming.session_confs import (
    NO_DATA_BATCHES,
    SESSION_CONFS,
    SHUFFLE_PARTITIONS,
    state_partitions,
)
from spark_tables.jobs.streaming.sink_queries import PROGRESS_RETENTION, SinkQuery, run_available_now, run_for
from spark_tables.jobs.streaming.sinks.writers import sink_connection, sink_writer

log = logging.getLogger(__name__)


def run_plan(spark: SparkSession, job: PlanJob, cancellation: Cancellation, clock: Clock | None = None) -> PlanResult:
    return run_plan_statement(spark, job.statement, job.options, cancellation, clock)


def run_plan_statement(
    spark: SparkSession,
    statement: PlanStatement,
    options: PlanOptions,
    cancellation: Cancellation,
    clock: Clock | None = None,
) -> PlanResult:
    """Run one plan statement; ``clock`` fixes processing time (default: each micro-batch's)."""
    result: dict[str, Any] = {"action": statement.action, "plan_uri": statement.uri}
    if statement.compiles:
        result["compile"] = compile_to_file(spark, statement, options)
    if statement.action == "explain":
        result["explain"] = explain_file(spark, statement.uri, options)
    if statement.executes:
        if statement.if_exists and not plan_exists(statement.uri):
            log.info("EXECUTE PLAN IF EXISTS: %s does not exist; nothing to run", statement.uri)
            result["execute"] = {"skipped": "the plan does not exist"}
        else:
            plan = read_plan(statement.uri)
            result["execute"] = execute(spark, plan, statement.uri, options, cancellation, clock or BatchClock())
    return PlanResult(**result)


def compile_to_file(spark: SparkSession, statement: PlanStatement, options: PlanOptions) -> dict[str, Any]:
    """Compile and write the plan file; an existing one is kept with IF NOT EXISTS (and by COMPILE AND EXECUTE, as
    in Flink, so that an edited plan is what runs) or replaced when ``table.plan.force-recompile`` is true."""
    exists = plan_exists(statement.uri)
    keep = statement.if_not_exists or statement.action == "compile_and_execute"
    if exists and not options.force_recompile:
        if not keep:
            raise SpecError(
                f"plan {statement.uri} exists: write COMPILE PLAN IF NOT EXISTS to keep it, or set "
                "table.plan.force-recompile = true to replace it"
            )
        log.info("plan %s exists: kept as it is", statement.uri)
        return {"written": False, "kept_existing": True}
    plan = compile_plan(
        spark,
        statement.inserts,
        options.configuration,
        options.postgres_sinks,
        options.table_upsert_sinks,
        options.sources,
        options.kafka_connections,
        options.kafka_sinks,
    )
    write_plan_text(statement.uri, plan.to_json())
    log.info("compiled %d node(s) into %s", len(plan.nodes), statement.uri)
    return {"written": True, "replaced": exists, "nodes": len(plan.nodes)}


def read_plan(uri: str) -> CompiledPlan:
    return CompiledPlan.from_json(read_plan_text(uri), where=f"plan {uri}")


def explain_file(spark: SparkSession, uri: str, options: PlanOptions) -> dict[str, Any]:
    """The plan's graph with every operator's TTL, after checking it against the catalog as it is now (its tables
    and columns must exist, with the types the plan was compiled with)."""
    plan = read_plan(uri)
    job_ttl = default_ttl(options.configuration)
    pipeline = _built(spark, plan, job_ttl, BatchClock(), options.kafka_connections)
    explained = explain(plan, job_ttl)
    explained["warnings"].extend(options.sink_warnings)
    for node in plan.nodes:
        now = pipeline.columns(node.id)
        if node.output_schema and tuple(node.output_schema) != now:
            explained["warnings"].append(
                f"node {node.id} ({node.TYPE}) outputs {_schema(now)} now, but was compiled to output "
                f"{_schema(node.output_schema)}: a table changed since; compile the plan again"
            )
    text = explain_text(explained, uri)
    log.info("%s", text)
    return {**explained, "text": text}


def execute(
    spark: SparkSession,
    plan: CompiledPlan,
    uri: str,
    options: PlanOptions,
    cancellation: Cancellation,
    clock: Clock,
) -> dict[str, Any]:
    """Run the sinks' queries (``sink_queries``), each from its own checkpoint: available-now, or for
    ``options.run_for``."""
    job_ttl = default_ttl(options.configuration)
    confs = {**SESSION_CONFS, SHUFFLE_PARTITIONS: str(state_partitions(spark, options.state_partitions))}
    if options.run_for_ms:  # every batch's progress is kept for the counts (Spark keeps 100 by default)
        confs[PROGRESS_RETENTION] = str(min(100_000, 100 + options.run_for_ms // options.trigger_interval_ms))
    with session_conf(spark, confs):
        pipeline = _built(spark, plan, job_ttl, clock, options.kafka_connections)
        sinks = [node for node in plan.nodes if isinstance(node, Sink)]
        flush = options.flush
        checkpoints = {
            node.id: f"{options.checkpoints.rstrip('/')}/{flat_name([uri])}/sink-{node.id}" for node in sinks
        }
        for node in sinks:  # every sink checked before any query starts
            if flush.enabled:
                buffered_aggregation(plan, node)
            check_implementations(plan, node, checkpoints[node.id])
        queries = []
        for node in sinks:
            sink = plan.sink(node.sink)
            writer = sink_writer(sink, connection=sink_connection(sink, options))
            checkpoint = checkpoints[node.id]
            record_implementations(plan, node, checkpoint)
            query = SinkQuery(f"plan_sink_{node.id}", pipeline.frames[node.id], writer, checkpoint, {"node": node.id})
            if flush.enabled and isinstance(sink, KeyedSink):
                query.buffer_output(flush, clock)
            if TRANSFORM_WITH_STATE not in node_implementations(plan, node).values():
                query.confs = NO_DATA_BATCHES
            queries.append(query)
        if options.run_for_ms:
            run_for(queries, options.run_for_ms, options.trigger_interval_ms, cancellation)
        else:
            run_available_now(queries, cancellation)
    for query in queries:
        if query.rows_dropped_late():
            log.warning(
                "query %s: Spark dropped %d input row(s) as late: the clock went back between micro-batches by more "
                "than the watermark delay of Spark's stream-stream join (%s); those rows joined nothing",
                query.name,
                query.rows_dropped_late(),
                WATERMARK_DELAY,
            )
    return {"queries": [query.report() for query in queries]}


def _built(
    spark: SparkSession,
    plan: CompiledPlan,
    job_ttl: timedelta,
    clock: Clock,
    kafka_connections: Mapping[str, Mapping[str, str]],
) -> Pipeline:
    """The plan's frames, every node and sink checked before any query starts."""
    pipeline = Pipeline(spark, job_ttl, clock, kafka_connections)
    for node in plan.nodes:
        pipeline.add(node)
        if isinstance(node, Sink):
            pipeline.check_sink(plan.sink(node.sink), node.inputs[0])
    return pipeline


def _schema(columns: tuple[Any, ...]) -> str:
    return "(" + ", ".join(f"{column.name} {column.type}" for column in columns) + ")"
