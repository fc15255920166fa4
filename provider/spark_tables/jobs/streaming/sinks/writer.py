"""The writer of a streaming query's sink: starts the query that writes a changelog into it, and counts what it wrote.

The stream reaching a sink is a changelog: the data columns, then Flink's row kind (``changelog.ROW_KIND``).
Each sink writes every micro-batch from ``foreachBatch`` and makes a replayed batch harmless, since Spark runs the
last batch of a checkpoint again when the query stopped before committing it. Each sink is a module of this
package (``catalog_table``, ``table_upsert``, ``postgres_upsert``), which ``writers`` chooses by the sink's kind.

foreachBatch runs its function one batch at a time: in the driver, or in session mode in a Python process of the
Spark Connect server (``connect_functions``), where the writer is a copy of the job's. So each writer adds up what it
wrote in a plain object and writes it after every batch into a file beside the checkpoint (``<checkpoint>-sink-counts``,
a file per start of the query), which ``SinkWriter.report()`` adds up once the query has ended.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.streaming.sinks import PlanSink
from spark_tables.jobs import files
from spark_tables.jobs.changelog import EMIT_ORDER, ROW_KIND
from spark_tables.jobs.connect_functions import carried
from spark_tables.jobs.table_format.tables import BatchWrite

log = logging.getLogger(__name__)

#: The suffix of the folder beside a sink query's checkpoint where its writer leaves its counts.
COUNTS = "-sink-counts"
#: The column carrying each row's position in its batch from before the batch is collected.
BATCH_ORDER = "__spark_tables_order"


@dataclass
class SinkCounts:
    """What a sink's query wrote, added up over its micro-batches."""

    #: Micro-batches the query handed to the sink, empty ones and replays included.
    batches: int = 0
    #: Batches that wrote anything, each in one commit: one PostgreSQL transaction, one set of files moved into a
    #: file table or one version it was switched to, one Delta commit.
    write_calls: int = 0
    #: Upserts: rows sent as upserts and keys sent as deletes (a key the table lacks is still counted).
    rows_upserted: int = 0
    rows_deleted: int = 0
    #: Catalog table: rows appended.
    rows_appended: int = 0
    #: Catalog table: the data files its commits added (what buffering makes fewer, FLIP-365).
    files_written: int = 0
    #: Catalog table: replayed batches skipped because their rows were in the table already.
    batches_already_written: int = 0

    def add(self, written: BatchWrite) -> None:
        """Add what one batch wrote into a catalog table."""
        self.write_calls += written.committed
        self.rows_appended += written.rows_appended
        self.rows_upserted += written.rows_upserted
        self.rows_deleted += written.rows_deleted
        self.files_written += written.files_written


def data_columns(frame: DataFrame) -> DataFrame:
    """A changelog's data columns: without its row kind and emit order."""
    return frame.drop(ROW_KIND, EMIT_ORDER)


class SinkWriter(ABC):
    """Starts the query writing a changelog into one sink, and counts what it writes."""

    def __init__(self, sink: PlanSink) -> None:
        self.sink = sink
        self.counts = SinkCounts()
        #: The job's session (the one that started the query), kept by ``prepare`` where a batch needs it; None in
        #: the Spark Connect server's copy, whose batches bring one on the job's session.
        self._spark: SparkSession | None = None
        self._checkpoint = ""
        self._query_id: str | None = None
        #: The files of this writer's counts, one per start of its query; the last is the running one's.
        self._counts_files: list[str] = []

    def __getstate__(self) -> dict[str, Any]:
        """The writer as foreachBatch's function carries it to a Spark Connect server: without a Spark session."""
        return {**self.__dict__, "_spark": None}

    def session(self, batch: DataFrame) -> SparkSession:
        """The session a batch's catalog operations run in: the job's (the batch's is a clone of it on a driver)."""
        return self._spark if self._spark is not None else batch.sparkSession

    def query_id(self) -> str:
        """The query's id, as Spark keeps it in the checkpoint's metadata: the same across restarts from it."""
        if self._query_id is None:
            self._query_id = json.loads(files.read_text(f"{self._checkpoint.rstrip('/')}/metadata"))["id"]
        return self._query_id

    def start(
        self,
        frame: DataFrame,
        *,
        checkpoint: str,
        query_name: str,
        available_now: bool = True,
        interval: str = "1 second",
        output_mode: str = "append",
    ) -> StreamingQuery:
        """Check that the sink can take ``frame`` (``SpecError`` when not, before anything runs), then start its
        query: available-now, or a micro-batch every ``interval``; ``output_mode`` is Spark's."""
        self.prepare(frame, checkpoint)
        self._checkpoint = checkpoint
        if not self._counts_files:
            files.remove(self._counts_folder)  # left by a run that ended before its report
        self._counts_files.append(f"{self._counts_folder}/{uuid.uuid4().hex}.json")
        self.counts = SinkCounts()
        writer = (
            frame.writeStream.outputMode(output_mode)
            .foreachBatch(carried(frame.sparkSession, self.write_counted))
            .option("checkpointLocation", checkpoint)
            .queryName(query_name)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            interval_ms = whole_milliseconds(parse_duration(interval, "interval"))  # Spark counts milliseconds
            writer = writer.trigger(processingTime=f"{interval_ms} milliseconds")
        return writer.start()

    @property
    def _counts_folder(self) -> str:
        """The folder beside the checkpoint where the query's counts are, a file per start."""
        return f"{self._checkpoint.rstrip('/')}{COUNTS}"

    def write_counted(self, batch: DataFrame, batch_id: int) -> None:
        """foreachBatch's function: write the batch, then what this start of the query wrote so far."""
        self._write_batch(batch, batch_id)
        self.record_counts()

    def record_counts(self) -> None:
        """Write the counts of the query's running start into its file."""
        if self._counts_files:
            files.write_bytes(self._counts_files[-1], json.dumps(dataclasses.asdict(self.counts)).encode())

    def report(self) -> dict[str, Any]:
        """What the sink wrote, added up over the starts of its query; once, when it has ended (its files go)."""
        total = {name: 0 for name in dataclasses.asdict(SinkCounts())}
        for location in self._counts_files:
            if files.exists(location):  # a start that ran no batch wrote none
                for name, value in json.loads(files.read_text(location)).items():
                    total[name] += value
        if self._counts_files:
            files.remove(self._counts_folder)
        return {"sink": self.sink.name, "kind": self.sink.kind, **total}

    def _count(self, written: BatchWrite | None, batch: DataFrame, batch_id: int) -> None:
        """Count what a batch wrote into a catalog table; None: the table had it already (``_skip``)."""
        if written is None:
            self._skip(batch, batch_id)
        else:
            self.counts.add(written)

    def _skip(self, batch: DataFrame, batch_id: int) -> None:
        """Write nothing for a replayed batch that is in the table already, but run its plan all the same: its
        stateful operators must commit their state for the batch (Spark checks that every state store did)."""
        batch.write.format("noop").mode("overwrite").save()
        self.counts.batches_already_written += 1
        log.info("catalog sink %s: batch %d is in the table already", self.sink.name, batch_id)

    @abstractmethod
    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        """Check the sink against the frame and keep what its batches need; ``SpecError`` when it cannot work."""

    @abstractmethod
    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Write one micro-batch; foreachBatch calls it in the driver."""
