"""Which writer writes a sink: one line per kind of sink (``core.streaming.sinks``)."""

from __future__ import annotations

from spark_tables.core.streaming.sinks import PlanSink, PostgresUpsertSink, TableSink, TableUpsertSink
from spark_tables.jobs.streaming.sinks.catalog_table import TableSinkWriter
from spark_tables.jobs.streaming.sinks.postgres_upsert import PostgresSinkWriter
from spark_tables.jobs.streaming.sinks.table_upsert import TableUpsertSinkWriter
from spark_tables.jobs.streaming.sinks.writer import SinkWriter

#: The writer of each kind of sink.
WRITERS: dict[type[PlanSink], type[SinkWriter]] = {
    TableSink: TableSinkWriter,
    TableUpsertSink: TableUpsertSinkWriter,
    PostgresUpsertSink: PostgresSinkWriter,
}


def sink_writer(sink: PlanSink, *, connection: dict | None) -> SinkWriter:
    """The writer of ``sink``; ``connection`` holds a PostgreSQL sink's connection arguments (``PostgresHook``'s,
    ``jobs/postgres.py``) and is ignored for a catalog table."""
    writer = WRITERS[type(sink)]
    return writer(sink, connection) if writer is PostgresSinkWriter else writer(sink)
