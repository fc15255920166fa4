"""A Kafka topic read as a stream of inserts, by Spark's own Kafka source (``spark-sql-kafka-0-10``): each message's
value parsed by ``from_json`` into the declared columns. The source's offsets are kept in the query's checkpoint,
as Spark's Kafka source keeps them, so a query that resumes reads each message once.

A message without a value (a compacted topic's tombstone) is no row, as Flink's JSON format skips it. A value that
does not parse into the columns (not JSON, or a field of another type) fails the query, naming the
topic, partition and offset, or, with ``on_malformed="skip"``, is left out and counted: an observed metric
(``malformed_metric``) of each micro-batch, which the job adds up into its XCom (``skipped_messages``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.changelog import insert_only
from spark_tables.jobs.streaming.progress import observed_metrics
from spark_tables.jobs.table_format.tables import StreamedTable

#: The column ``from_json`` puts a message's text in when the text does not parse (Spark's PERMISSIVE mode).
MALFORMED_COLUMN = "__malformed_value"
#: How much of a malformed message the failure shows.
SHOWN_CHARACTERS = 200


#: The start of the name of each source's observed metric of the messages it left out.
MALFORMED_METRIC = "malformed:"


def malformed_metric(source_name: str) -> str:
    """The name of the observed metric counting the messages of ``source_name`` that were left out."""
    return MALFORMED_METRIC + source_name


def skipped_messages(progress: Sequence[Any]) -> dict[str, int]:
    """The messages each source with ``on_malformed="skip"`` left out over a query's micro-batches, by source name
    (only sources that left some out)."""
    skipped: dict[str, int] = {}
    for batch in progress:
        for name in batch.get("observedMetrics") or {}:
            metrics = observed_metrics(batch, name) if name.startswith(MALFORMED_METRIC) else None
            if metrics and metrics.get("malformed"):
                source = name.removeprefix(MALFORMED_METRIC)
                skipped[source] = skipped.get(source, 0) + int(metrics["malformed"])
    return skipped


@dataclass(frozen=True)
class KafkaTopicStream:
    """``source``'s topic through the connection ``options`` (``core.kafka.spark_options``: ``kafka.*``)."""

    source: KafkaTopicSource
    options: Mapping[str, str] = field(repr=False)

    def changes(self, spark: SparkSession) -> StreamedTable:
        messages = (
            spark.readStream.format("kafka")
            .options(**self.options)
            .option("subscribe", self.source.topic)
            .option("startingOffsets", self.source.starting_offsets)
            .load()
            .where(F.col("value").isNotNull())  # a tombstone deletes a key: no row of an insert-only stream
        )
        text = F.col("value").cast("string")
        parsed = messages.select(
            F.from_json(
                text,
                f"{self.source.columns}, {MALFORMED_COLUMN} STRING",
                {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": MALFORMED_COLUMN},
            ).alias("message"),
            "partition",
            "offset",
        )
        malformed = F.col(f"message.{MALFORMED_COLUMN}").isNotNull() | F.col("message").isNull()
        if self.source.on_malformed == "fail":
            checked = parsed.withColumn(
                "message",
                F.when(
                    malformed,
                    F.raise_error(
                        F.concat(
                            F.lit(f"kafka source {self.source.name}: the message of topic {self.source.topic} at "),
                            F.lit("partition "),
                            F.col("partition").cast("string"),
                            F.lit(" offset "),
                            F.col("offset").cast("string"),
                            F.lit(" is not JSON of the declared columns: "),
                            F.substring(
                                F.coalesce(F.col(f"message.{MALFORMED_COLUMN}"), F.lit("null")), 1, SHOWN_CHARACTERS
                            ),
                            F.lit(" (on_malformed='skip' leaves such messages out and counts them)"),
                        )
                    ),
                ).otherwise(F.col("message")),
            )
        else:
            checked = parsed.observe(
                malformed_metric(self.source.name), F.count(F.when(malformed, 1)).alias("malformed")
            ).where(~malformed)
        rows = checked.select("message.*").drop(MALFORMED_COLUMN)
        return StreamedTable(insert_only(rows), True)
