"""A Kafka topic takes updating streams by key, as Flink's upsert-kafka connector does: every change but -U is sent
as a message whose key is the key columns' JSON (``to_json`` of their struct) and whose value is the row's JSON
(nulls written as null), a deleted key (-D) as a tombstone, a message without value. Spark's own Kafka writer sends
a micro-batch's messages from the partitions that hold them: a key's changes come from one partition, in order (the
plan's operators emit them so), and go to one Kafka partition, the key's, so a consumer of the topic, and a
compacted topic's cleaner, see them in order.

Kafka's writer sends a batch's messages at least once: a batch Spark replays (it does so with the last batch of a
checkpoint whose query stopped before committing it) sends them again. Each is a key's value as it was then, sent
again in the same order, so a reader of the topic by key (a compacted topic, a table kept from it) ends as it was.
With FLIP-365's buffer, a flush sends one message a key: its latest row.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.sinks import KafkaUpsertSink
from spark_tables.jobs.changelog import DELETE, EMIT_ORDER, ROW_KIND, UPDATE_BEFORE, quoted
from spark_tables.jobs.streaming.sinks.writer import SinkWriter

log = logging.getLogger(__name__)

#: A null column is in the JSON as null, as Flink's JSON format writes it: a reader sees every column.
JSON_OPTIONS = {"ignoreNullFields": "false"}


class KafkaUpsertSinkWriter(SinkWriter):
    """Sends an updating stream to a Kafka topic by key, one Spark write of a micro-batch's messages."""

    sink: KafkaUpsertSink

    #: The columns of a message's value, in order (the frame's but the row kind), known once the frame is checked.
    columns: list[str]

    def __init__(self, sink: KafkaUpsertSink, connection: Mapping[str, str] | None) -> None:
        super().__init__(sink)
        if not connection:
            raise SpecError(f"kafka sink {sink.name}: no settings for connection {sink.conn_id}")
        self._options = dict(connection)

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        columns = [column for column in frame.columns if column not in (ROW_KIND, EMIT_ORDER)]
        missing = [column for column in self.sink.key if column not in columns]
        if missing:
            raise SpecError(f"kafka sink {self.sink.name}: the query gives no key column {', '.join(missing)}")
        self.columns = columns

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        changes = batch.where(F.col(ROW_KIND) != UPDATE_BEFORE)
        messages = changes.select(
            F.to_json(F.struct(*(quoted(column) for column in self.sink.key)), JSON_OPTIONS).alias("key"),
            F.when(F.col(ROW_KIND) == DELETE, F.lit(None).cast("string"))
            .otherwise(F.to_json(F.struct(*(quoted(column) for column in self.columns)), JSON_OPTIONS))
            .alias("value"),
        )
        messages = messages.persist()  # computed once, for its counts and the send
        try:
            counted = messages.agg(
                F.count(F.lit(1)).alias("messages"), F.count(F.when(F.col("value").isNull(), 1)).alias("tombstones")
            ).first()
            total, tombstones = int(counted["messages"]), int(counted["tombstones"])
            if total:
                messages.write.format("kafka").options(**self._options).option("topic", self.sink.topic).save()
        finally:
            messages.unpersist()
        if total:
            self.counts.write_calls += 1
        self.counts.rows_upserted += total - tombstones
        self.counts.rows_deleted += tombstones
        log.info(
            "kafka sink %s: batch %d sent %d message(s) to %s, %d of them tombstones",
            self.sink.name,
            batch_id,
            total,
            self.sink.topic,
            tombstones,
        )

    def report(self) -> dict[str, Any]:
        """What the sink wrote, and the messages it sent (upserts and tombstones)."""
        report = super().report()
        return {**report, "messages_sent": report["rows_upserted"] + report["rows_deleted"]}
