"""The streaming queries of a plan's sinks, run available-now or for a time, and what each did.

Available-now (the default): each sink's query processes what its sources hold, then ends, one query after the
other; a buffered sink's query then gets an end-of-input flush request, and runs once more when the buffer is in
the state store (a micro-batch carries the request). For a time (``run_for``): every sink's query runs at once, a
micro-batch every ``trigger_interval`` when there is data; a buffered query gets an idle flush request whenever its
input has nothing available after a batch that read data (FLIP-365's ``notifyNothingAvailable``), and at the
deadline an end flush request, processed before the queries stop. However a run ends, a memory buffer then writes
what it still holds (``MemoryBuffer.close``).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from spark_tables.core.errors import JobError, SpecError, one_line
from spark_tables.core.streaming.flush import MEMORY, STATE_STORE, FlushOptions, buffer_store
from spark_tables.core.streaming.sinks import KeyedSink
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.session_conf import session_conf
from spark_tables.jobs.session_facts import is_connect
from spark_tables.jobs.streaming.clock import Clock
from spark_tables.jobs.streaming.durable_buffer import DurableBuffer
from spark_tables.jobs.streaming.flushing import OutputBuffer
from spark_tables.jobs.streaming.memory_buffer import MemoryBuffer
from spark_tables.jobs.streaming.progress import input_rows
from spark_tables.jobs.streaming.sinks.postgres_upsert import PostgresSinkWriter
from spark_tables.jobs.streaming.sinks.writer import SinkWriter
from spark_tables.jobs.streaming.sources.kafka_topic import skipped_messages

log = logging.getLogger(__name__)

#: Spark's number of progress updates a query keeps, which the counts are summed from.
PROGRESS_RETENTION = "spark.sql.streaming.numRecentProgressUpdates"


@dataclass
class SinkQuery:
    """One sink's query: its frame (through its buffer, if any), its writer, its checkpoint, its progress.

    ``name`` is Spark's name of the query, also in the log; ``labels`` go into its report (a plan's node id).
    ``output_mode`` is Spark's: ``append`` for a plan's changelog, ``update`` for Spark's own aggregation.
    ``confs`` are session confs of this query alone: set as it starts, when Spark reads them, and put back.
    """

    name: str
    frame: DataFrame
    writer: SinkWriter
    checkpoint: str
    labels: dict[str, Any] = field(default_factory=dict)
    output_mode: str = "append"
    buffer: OutputBuffer | MemoryBuffer | None = None  # a DurableBuffer is a MemoryBuffer
    confs: dict[str, str] = field(default_factory=dict)
    progress: list[dict[str, Any]] = field(default_factory=list)

    def buffer_output(self, options: FlushOptions, clock: Clock) -> None:
        """Put FLIP-365's buffer in front of the sink (one upserting by key), where ``buffer_store`` says: in the
        driver with a log in the checkpoint, in the state store, or in the driver's memory only; ``SpecError`` for
        a sink it cannot buffer."""
        sink = self.writer.sink
        if not isinstance(sink, KeyedSink):
            raise SpecError(f"sink {sink.name} appends every row: only a sink upserting by key takes buffered output")
        spark = self.frame.sparkSession
        postgres = self.writer if isinstance(self.writer, PostgresSinkWriter) else None
        store = buffer_store(options, sink.name, postgres is not None, is_connect(spark))
        if postgres is None or store == STATE_STORE:  # buffer_store: the other stores are a PostgreSQL sink's
            self.buffer = OutputBuffer(spark, self.frame, sink, options, clock, self.checkpoint)
            self.frame = self.buffer.frame
        else:
            driver_buffer = MemoryBuffer if store == MEMORY else DurableBuffer
            self.buffer = self.writer = driver_buffer(postgres, options, clock, self.checkpoint)

    def start(self, available_now: bool, trigger_interval_ms: int = 1000) -> StreamingQuery:
        with session_conf(self.frame.sparkSession, self.confs):
            return self.writer.start(
                self.frame,
                checkpoint=self.checkpoint,
                query_name=self.name,
                available_now=available_now,
                interval=f"{trigger_interval_ms} ms",
                output_mode=self.output_mode,
            )

    def failure(self, error: BaseException) -> JobError:
        """The query's failure, in one line naming its sink and query."""
        return JobError(f"sink {self.writer.sink.name} (query {self.name}): {one_line(error)}")

    def rows_dropped_late(self) -> int:
        """The input rows Spark's watermarked operators dropped as late (``numRowsDroppedByWatermark``): none, unless
        the processing-time clock stepped back between batches by more than the watermark delay (``spark_join``)."""
        return sum(
            operator.get("numRowsDroppedByWatermark", 0)
            for progress in self.progress
            for operator in progress.get("stateOperators", [])
        )

    def report(self) -> dict[str, Any]:
        with_data = [p for p in self.progress if input_rows(p) > 0]
        last = self.progress[-1] if self.progress else {}
        return {
            **self.labels,
            "checkpoint": self.checkpoint,
            "batches": len(with_data),
            "input_rows": sum(input_rows(p) for p in self.progress),
            "processing_ms": sum(p.get("durationMs", {}).get("triggerExecution", 0) for p in with_data),
            "state_operators": [
                {
                    "operator": operator.get("operatorName"),
                    "rows": operator.get("numRowsTotal"),
                    "bytes": operator.get("memoryUsedBytes"),
                }
                for operator in last.get("stateOperators", [])
            ],
            "rows_dropped_late": self.rows_dropped_late(),
            **({"malformed_skipped": skipped} if (skipped := skipped_messages(self.progress)) else {}),
            **self.writer.report(),
            **(self.buffer.buffer_report(self.progress) if self.buffer is not None else {}),
        }


def run_available_now(queries: list[SinkQuery], cancellation: Cancellation) -> None:
    for query in queries:
        cancellation.check()
        log.info("running query %s available-now (checkpoint %s)", query.name, query.checkpoint)
        try:
            _run_available_now(query, cancellation)
            if query.buffer is not None:  # the end of the input: flush what is buffered
                query.buffer.request("end")
                if query.buffer.requests_need_a_batch:
                    _run_available_now(query, cancellation)
        except StreamingQueryException as err:
            raise query.failure(err) from err
        finally:
            if query.buffer is not None:
                query.buffer.close(failed=sys.exc_info()[0] is not None)


def run_for(queries: list[SinkQuery], run_for_ms: int, trigger_interval_ms: int, cancellation: Cancellation) -> None:
    """Run every query at once for ``run_for_ms``; flush the buffers when idle and at the end."""
    started = {query.name: query.start(False, trigger_interval_ms) for query in queries}
    log.info("running %d sink query(ies) for %d ms, a micro-batch every %d ms", len(queries), run_for_ms,
             trigger_interval_ms)  # fmt: skip
    deadline = time.monotonic() + run_for_ms / 1000
    idle_since_batch = {query.name: -1 for query in queries}
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            first = started[queries[0].name]
            # a wait that ends if a query fails; Spark takes whole milliseconds, at least 1
            first.awaitTermination(max(0.001, min(remaining, trigger_interval_ms / 1000)))
            for query in queries:
                running = started[query.name]
                if running.exception() is not None:
                    raise query.failure(running.exception())
                if not running.isActive:
                    raise RuntimeError(f"query {query.name} stopped before its time was up")
                if cancellation.requested:
                    cancellation.check()
                if query.buffer is not None:
                    last_data_batch = _last_data_batch(running, query.buffer)
                    idle = not running.status["isDataAvailable"] and not running.status["isTriggerActive"]
                    if idle and last_data_batch > idle_since_batch[query.name]:
                        log.info("query %s: input idle after batch %d, buffer flush requested", query.name,
                                 last_data_batch)  # fmt: skip
                        query.buffer.request("idle")
                        idle_since_batch[query.name] = last_data_batch
        for query in queries:
            if query.buffer is not None:
                query.buffer.request("end")
            started[query.name].processAllAvailable()
    except StreamingQueryException as err:  # awaitTermination and processAllAvailable raise a query's failure
        failed = next((query for query in queries if started[query.name].exception() is not None), queries[0])
        raise failed.failure(err) from err
    finally:
        for query in queries:
            running = started[query.name]
            running.stop()
            query.progress += [p for p in running.recentProgress if p.get("batchId") is not None]
            if query.buffer is not None:
                query.buffer.close(failed=sys.exc_info()[0] is not None or running.exception() is not None)
    for query in queries:
        if started[query.name].exception() is not None:
            raise query.failure(started[query.name].exception())


def _last_data_batch(query: StreamingQuery, buffer: OutputBuffer | MemoryBuffer) -> int:
    """The id of the query's last micro-batch that read data (flush requests left out), -1 if none."""
    for progress in reversed(query.recentProgress):
        if buffer.data_rows(progress):
            return progress["batchId"]
    return -1


def _run_available_now(query: SinkQuery, cancellation: Cancellation) -> None:
    running = query.start(True)
    while not running.awaitTermination(1):
        if cancellation.requested:
            running.stop()
            cancellation.check()
    if running.exception() is not None:
        raise running.exception()
    query.progress += [p for p in running.recentProgress if p.get("batchId") is not None]
