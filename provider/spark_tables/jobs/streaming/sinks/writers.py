"""Which writer writes a sink: one line per kind of sink (``core.streaming.sinks``)."""

from __future__ import annotations

from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import (
    KafkaUpsertSink,
    PlanSink,
    PostgresUpsertSink,
    TableSink,
    TableUpsertSink,
)
from spark_tables.jobs.streaming.sinks.catalog_table import TableSinkWriter
from spark_tables.jobs.streaming.sinks.kafka_upsert import KafkaUpsertSinkWriter
from spark_tables.jobs.streaming.sinks.postgres_upsert import PostgresSinkWriter
from spark_tables.jobs.streaming.sinks.table_upsert import TableUpsertSinkWriter
from spark_tables.jobs.streaming.sinks.writer import SinkWriter

#: The writer of each kind of sink.
WRITERS: dict[type[PlanSink], type[SinkWriter]] = {
    TableSink: TableSinkWriter,
    TableUpsertSink: TableUpsertSinkWriter,
    PostgresUpsertSink: PostgresSinkWriter,
    KafkaUpsertSink: KafkaUpsertSinkWriter,
}


def sink_connection(sink: PlanSink, options: StreamingOptions) -> dict | None:
    """What the writer of ``sink`` connects with, from the job's options: a PostgreSQL sink's connection arguments
    (by sink name), a Kafka sink's connector options (by connection id, as its sources'); None for a catalog
    table."""
    if isinstance(sink, KafkaUpsertSink):
        return options.kafka_connections.get(sink.conn_id)
    return options.connections.get(sink.name) if isinstance(sink, PostgresUpsertSink) else None


def sink_writer(sink: PlanSink, *, connection: dict | None) -> SinkWriter:
    """The writer of ``sink``; ``connection`` holds a PostgreSQL sink's connection arguments (``PostgresHook``'s,
    ``jobs/postgres.py``) or a Kafka sink's connector options (``core.kafka.spark_options``), and is ignored for a
    catalog table."""
    writer = WRITERS[type(sink)]
    return writer(sink, connection) if writer in (PostgresSinkWriter, KafkaUpsertSinkWriter) else writer(sink)
