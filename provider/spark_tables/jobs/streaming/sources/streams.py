"""Which source streams a table a plan reads: one line per kind of source (``StreamSource``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.changelog import ROW_KIND
from spark_tables.jobs.streaming.sources.catalog_table import CatalogTableSource
from spark_tables.jobs.streaming.sources.kafka_topic import KafkaTopicStream
from spark_tables.jobs.streaming.sources.source import StreamSource


@contextmanager
def source_views(
    spark: SparkSession, sources: Sequence[KafkaTopicSource], kafka_connections: Mapping[str, Mapping[str, str]]
) -> Iterator[None]:
    """Each declared source as a temporary view of its stream under its name while the block runs, for SQL that
    reads it by name (a streaming aggregation's); the view's columns are the source's, without the changelog
    column. The views go when the block ends: left in a shared session, one would hide the catalog table of its
    name from the session's next job. Under Spark Connect a query's SQL is analysed when it starts, so the block
    holds its start."""
    made: list[str] = []
    try:
        for source in sources:
            declared_source_rows(spark, source, kafka_connections).createOrReplaceTempView(source.name)
            made.append(source.name)
        yield
    finally:
        for name in made:
            spark.catalog.dropTempView(name)


def declared_source_rows(
    spark: SparkSession, source: KafkaTopicSource, kafka_connections: Mapping[str, Mapping[str, str]]
) -> DataFrame:
    """A declared source's stream as rows of its columns, without the changelog column: what SQL reads by its name
    and what a lookup join's probe enriches."""
    return stream_source(source.name, source, kafka_connections).changes(spark).changes.drop(ROW_KIND)


def stream_source(
    table: str, declared: KafkaTopicSource | None, kafka_connections: Mapping[str, Mapping[str, str]]
) -> StreamSource:
    """The source of ``table``: the Kafka topic the task declared under its name, through its connection's options
    (``kafka_connections``, by connection id); else the catalog table, read by Spark's streaming reader."""
    if declared is None:
        return CatalogTableSource(table)
    options = kafka_connections.get(declared.conn_id)
    if options is None:  # the Airflow side resolves every connection a job's sources name
        raise SpecError(f"kafka source {declared.name}: connection {declared.conn_id!r} was not resolved for the job")
    return KafkaTopicStream(declared, options)
