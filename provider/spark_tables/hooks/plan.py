"""Compiled plans on the Airflow side: reading a plan file, the connections of the PostgreSQL sinks it writes and of
the Kafka topics it reads and writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.plan.nodes import SourceScan
from spark_tables.core.plan.statements import PlanStatement
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.core.streaming.sinks import KafkaUpsertSink, KeyedSink, PostgresUpsertSink, TableUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.hooks.kafka import kafka_topics
from spark_tables.hooks.object_storage import storage_path
from spark_tables.hooks.postgres import PostgresSinkHook
from spark_tables.utils import settings


class CompiledPlanHook(BaseHook):
    """Reads plan files through Airflow's object storage (local paths, ``file://``, ``s3://`` with its connection)
    and gathers what a job running plan statements needs (the sinks' connections through ``PostgresSinkHook``, the
    Kafka sources' through ``hooks.kafka``)."""

    def read_plan(self, uri: str) -> CompiledPlan | None:
        """The plan at ``uri``, checked; None when there is none (yet)."""
        text = _plan_text(uri)
        return None if text is None else CompiledPlan.from_json(text, where=f"plan {uri}")

    def plan_options(
        self,
        statements: Sequence[PlanStatement],
        configuration: dict[str, Any] | None,
        postgres_sinks: Sequence[PostgresUpsertSink],
        checkpoints: str | None,
        run_for: str = "",
        trigger_interval: str = "1 s",
        catalog_sinks: Sequence[str | TableUpsertSink] = (),
        sources: Sequence[KafkaTopicSource] = (),
        kafka_sinks: Sequence[KafkaUpsertSink] = (),
    ) -> PlanOptions:
        """What a job running these plan statements needs: the options, the sinks a compile may write, the sources
        it may read, the connections of the declared PostgreSQL sinks and Kafka topics, and the warnings about the
        Kafka sinks' topics (``sink_warnings``). An explained or executed plan reads only the Kafka sources the task
        declares, as it declares them; an executed plan writes only the sinks the task declares: its PostgreSQL and
        Kafka sinks and keyed catalog tables as declared (``check_declared``), the catalog tables it appends to among
        ``catalog_sinks``' names."""
        keyed = tuple(sink for sink in catalog_sinks if isinstance(sink, TableUpsertSink))
        options = PlanOptions(  # the options checked first: a bad one fails before any connection is looked up
            configuration=dict(configuration or {}),
            postgres_sinks=tuple(postgres_sinks),
            table_upsert_sinks=keyed,
            sources=tuple(sources),
            kafka_sinks=tuple(kafka_sinks),
            checkpoints=checkpoints or settings.checkpoint_uri(),
            run_for=run_for,
            trigger_interval=trigger_interval,
        )
        for read in (statement for statement in statements if statement.action == "explain" or statement.executes):
            plan = self.read_plan(read.uri)  # its JSON and TTLs checked here: EXPLAIN's driver checks the rest
            for scan in plan.nodes if plan else ():
                if isinstance(scan, SourceScan) and scan.source is not None and scan.source not in sources:
                    raise SpecError(
                        f"plan {read.uri} reads kafka source {scan.source.name!r} (topic {scan.source.topic}, "
                        f"connection {scan.source.conn_id!r}), which the task does not declare as such: declare it in "
                        "sources, or compile the plan again"
                    )
        executed = [statement for statement in statements if statement.executes]
        tables = {str(TableIdentifier.parse(name)) for name in catalog_sinks if isinstance(name, str)}
        for parsed in executed:
            plan = self.read_plan(parsed.uri)  # None: EXECUTE PLAN IF EXISTS of a plan that is not there
            for sink in plan.sinks if plan else ():
                if isinstance(sink, PostgresUpsertSink):
                    check_declared(sink, postgres_sinks, parsed.uri)
                elif isinstance(sink, KafkaUpsertSink):
                    check_declared(sink, kafka_sinks, parsed.uri)
                elif isinstance(sink, TableUpsertSink):
                    check_declared(sink, keyed, parsed.uri)
                elif sink.name not in tables:
                    raise SpecError(
                        f"plan {parsed.uri} writes catalog table {sink.name}, which the task does not declare: add it "
                        "to catalog_sinks, or compile the plan again"
                    )
        if sources or kafka_sinks:  # looked up once the plans' sinks are found declared
            kafka = kafka_topics(sources, kafka_sinks)
            options = dataclasses.replace(options, kafka_connections=kafka.connections, sink_warnings=kafka.warnings)
        if not executed:
            return options
        return dataclasses.replace(options, connections=PostgresSinkHook().sink_connections(list(postgres_sinks)))


#: How a task declares each kind of keyed sink: what the kind is called, and the operator's parameter.
_DECLARED_IN = {
    PostgresUpsertSink: ("PostgreSQL sink", "postgres_sinks"),
    KafkaUpsertSink: ("Kafka sink", "kafka_sinks"),
    TableUpsertSink: ("keyed catalog sink", "catalog_sinks"),
}


def check_declared(sink: KeyedSink, declared: Sequence[KeyedSink], uri: str) -> None:
    """A plan file is edited by people, and its sinks name connections and keys: an executed plan writes only to a
    keyed sink the task declares, as it declares it (name, key, and a PostgreSQL sink's connection and table, a
    Kafka sink's connection and topic). Raises ``SpecError`` in one line, before any connection is looked up or query
    started."""
    if sink in declared:
        return
    same_name = next((given for given in declared if given.name == sink.name), None)
    what, listed = _DECLARED_IN[type(sink)]
    if same_name is None:
        raise SpecError(
            f"plan {uri} writes {what} {sink.name!r} ({_declared_as(sink)}), which the task does not declare: add it "
            f"to {listed}, or compile the plan again"
        )
    raise SpecError(
        f"plan {uri} writes {what} {sink.name!r} as {_declared_as(sink)}, but the task declares it as "
        f"{_declared_as(same_name)}: compile the plan again, or declare the sink as the plan has it"
    )


def _declared_as(sink: KeyedSink) -> str:
    if isinstance(sink, PostgresUpsertSink):
        return f"connection {sink.conn_id!r}, table {sink.table}, key {list(sink.key)}"
    if isinstance(sink, KafkaUpsertSink):
        return f"connection {sink.conn_id!r}, topic {sink.topic}, key {list(sink.key)}"
    return f"key {list(sink.key)}"


@reached_by_airflow
def _plan_text(uri: str) -> str | None:
    path = storage_path(uri)
    return path.read_text() if path.exists() else None
