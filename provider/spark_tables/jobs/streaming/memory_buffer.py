"""FLIP-365's ``execution.flush.memory-buffer-only`` on Spark: the buffer in the driver's memory, in front of a
PostgreSQL sink, instead of in the state store (``streaming.buffer``).

foreachBatch hands every micro-batch's changes to the driver anyway, since the sink collects them there; the memory
buffer keeps the latest change of each sink key (a delete included) and writes the buffer in one transaction when
a flush comes:

- on the interval: at the first micro-batch at or after the end of the ``max_interval`` window (aligned to the
  epoch, as the state store's buffer aligns it) in which the first buffered change fell, before that batch's
  changes, which fall in the next window;
- when full: after the batch that brings the buffer to ``state.backend.cache.max-entries-num`` keys;
- on request, at once (the buffer is in the driver, no micro-batch needs to carry it): when the input has nothing
  available, and at the end of the input; after the end, every later batch is written as it comes;
- when the run ends in any other way (a failure, a cancellation): what the buffer holds is written before the
  error goes on, should the sink still take it.

A flush writes the records at or below the query's current watermark (its last progress's) first, then those above
it, as ``streaming.buffer`` does. The trade, on Spark: no state store reads or writes, no second stateful operator and
no Python worker for the buffer, for outputs that live in the driver's memory only between flushes. Spark commits a
micro-batch once foreachBatch returns, so a driver that dies without its exit path (killed by SIGKILL, out of
memory, its host lost) loses the changes buffered since the last flush: the aggregation's state has them, the sink
does not, and each such key's row keeps its earlier value until the key changes again. A marker in the checkpoint
(``<checkpoint>-memory-buffer``, written when the buffer stops being empty, removed by the flush that empties it)
tells the next run, which says so in the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from spark_tables.core.streaming.flush import MAX_ENTRIES_OPTION, MEMORY, FlushOptions
from spark_tables.jobs import files
from spark_tables.jobs.streaming.buffer import CAUSES, WATERMARK_DELAY, event_time_column, window_end
from spark_tables.jobs.streaming.clock import Clock
from spark_tables.jobs.streaming.progress import input_rows
from spark_tables.jobs.streaming.sinks.postgres_upsert import PostgresSinkWriter
from spark_tables.jobs.streaming.sinks.writer import SinkCounts, SinkWriter

log = logging.getLogger(__name__)

#: The memory buffer's flush causes: the state store buffer's, and a full buffer.
MEMORY_CAUSES = (*CAUSES, "full")
#: The marker's file name, before the id of the first batch whose output it holds.
MARKER_PREFIX = "pending-since-batch-"


class _DriverTime:
    """What a clock reads "now" from, in the driver (``TimerValues``' processing time, for ``BatchClock``)."""

    def getCurrentProcessingTimeInMs(self) -> int:
        return time.time_ns() // 1_000_000


class MemoryBuffer(SinkWriter):
    """The sink's writer (it wraps the PostgreSQL sink's) and the query's buffer, its outputs in the driver."""

    #: A request is carried out at once, not by a micro-batch.
    requests_need_a_batch = False
    #: Where what is buffered is kept (``core.streaming.flush``): the driver's memory only (``DurableBuffer``: a log
    #: too).
    STORE = MEMORY
    #: The causes a flush may have.
    FLUSH_CAUSES = MEMORY_CAUSES

    def __init__(self, writer: PostgresSinkWriter, options: FlushOptions, clock: Clock, checkpoint: str) -> None:
        self.writer = writer
        super().__init__(writer.sink)
        self.interval_ms = options.max_interval_ms
        #: A full buffer flushes (None: no bound).
        self.max_entries: int | None = options.max_entries
        self.clock = clock
        self.marker_folder = f"{checkpoint.rstrip('/')}-memory-buffer"
        self.entries: dict[tuple, tuple | None] = {}
        self.since_ms: int | None = None
        self.ending = False
        self.emitted = 0
        self.flushes = dict.fromkeys(self.FLUSH_CAUSES, 0)
        self.running: StreamingQuery | None = None
        self.event_time_at: int | None = None
        self.delay_ms: int | None = None
        self._lock = threading.Lock()

    @property  # type: ignore[override]
    def counts(self) -> SinkCounts:
        """The PostgreSQL sink's counts: its writer writes the flushes."""
        return self.writer.counts

    @counts.setter
    def counts(self, counts: SinkCounts) -> None:
        self.writer.counts = counts

    def start(self, frame: DataFrame, **kwargs: Any) -> StreamingQuery:
        """``SinkWriter.start``, the query kept: its progress gives the watermark."""
        self.running = super().start(frame, **kwargs)
        return self.running

    def prepare(self, frame: DataFrame, checkpoint: str) -> None:
        self.writer.prepare(frame, checkpoint)
        columns = [field for field in frame.schema.fields if field.name in self.writer.columns]
        at = event_time_column(columns)
        self.event_time_at = None if at is None else self.writer.columns.index(columns[at].name)
        self.delay_ms = None if at is None else int(columns[at].metadata[WATERMARK_DELAY])
        self._recover()

    def _recover(self) -> None:
        """At the query's start: say what a run that ended without flushing its buffer lost (its marker)."""
        left = files.data_file_names(self.marker_folder)
        if left:
            log.warning(
                "memory buffer of sink %s: the run that ended before this one did not flush its buffer (its driver "
                "was killed): the output of its micro-batches from batch %s on is missing from %s, and each key "
                "they changed keeps its earlier value there until it changes again; to rebuild the table, run once "
                "from a new checkpoint, or run without execution.flush.memory-buffer-only",
                self.sink.name,
                left[0].removeprefix(MARKER_PREFIX),
                self.sink.table,
            )
            files.remove(self.marker_folder)

    def _write_batch(self, batch: DataFrame, batch_id: int) -> None:
        self.counts.batches += 1
        rows = self.writer.last_change_rows(batch)
        changes = self.writer.by_key(rows)
        with self._lock:
            now = self.clock.now_ms(_DriverTime())
            if self.since_ms is not None and now >= window_end(self.since_ms, self.interval_ms):
                self._flush("interval")  # this batch's changes fall in the next window
            if not changes:
                return
            if not self.entries:
                self.since_ms = now
            self._keep(batch_id, rows)
            self.entries.update(changes)
            if self.ending:
                self._flush("end")
            elif self.max_entries is not None and len(self.entries) >= self.max_entries:
                log.info("memory buffer of sink %s: full (%s=%d)", self.sink.name, MAX_ENTRIES_OPTION,
                         self.max_entries)  # fmt: skip
                self._flush("full")

    def _keep(self, batch_id: int, rows: pa.Table) -> None:
        """Before a batch's changes (``rows``, ``last_change_rows``') join the buffer: the marker, when they are the
        first since a flush."""
        if not self.entries:
            files.write_bytes(f"{self.marker_folder}/{MARKER_PREFIX}{batch_id}", b"")

    def _forget(self) -> None:
        """Once a flush has written the buffer: what ``_keep`` wrote goes."""
        files.remove(self.marker_folder)

    def request(self, cause: str) -> None:
        """Flush now, on ``cause`` (``idle`` or ``end``); after ``end``, every later batch is written as it comes."""
        with self._lock:
            self.ending = self.ending or cause == "end"
            self._flush(cause)
            self.record_counts()  # a flush on request comes after the query's last batch

    def close(self, failed: bool) -> None:
        """Write what the buffer still holds, once its query has stopped; after a failure, a write that fails too is
        logged, and the failure goes on."""
        with self._lock:
            try:
                self._flush("end")
                self.record_counts()  # a flush at close comes after the query's last batch
            except Exception as err:
                if not failed:
                    raise
                log.warning("memory buffer of sink %s: %d buffered record(s) not written: %s", self.sink.name,
                            len(self.entries), err)  # fmt: skip

    def _flush(self, cause: str) -> None:
        if not self.entries:
            return
        watermark_ms = self._watermark_ms()
        ordered = sorted(self.entries.items(), key=lambda entry: self._above(entry[1], watermark_ms))
        self.writer.write_changes(dict(ordered), f"{cause} flush")
        self.emitted += len(ordered)
        self.flushes[cause] += 1
        self.entries.clear()
        self.since_ms = None
        self._forget()

    def _watermark_ms(self) -> int | None:
        """The query's current watermark: the one its next micro-batch would take, from its last progress (that
        batch's watermark, or its latest event time less the delay, whichever is later); None without one."""
        progress = self.running.lastProgress if self.running is not None else None
        event_time = (progress or {}).get("eventTime") or {}
        marks = [_epoch_ms(event_time["watermark"])] if "watermark" in event_time else []
        if "max" in event_time and self.delay_ms is not None:
            marks.append(_epoch_ms(event_time["max"]) - self.delay_ms)
        return max(marks, default=None)

    def _above(self, row: Sequence[Any] | None, watermark_ms: int | None) -> bool:
        """Whether a record comes after the watermark (False: at or below it, or no event time to tell)."""
        if row is None or self.event_time_at is None or watermark_ms is None:
            return False
        event_time = row[self.event_time_at]
        return event_time is not None and event_time.timestamp() * 1000 > watermark_ms

    def data_rows(self, progress: Any) -> int:
        """The rows one micro-batch read from the query's sources."""
        return input_rows(progress)

    def buffer_report(self, progress: list[dict[str, Any]]) -> dict[str, Any]:
        """From the progress of the runs of its query: records in and emitted, flushes by cause."""
        return {
            "buffer": {
                "store": self.STORE,
                "records_in": sum(self.data_rows(p) for p in progress),
                "records_emitted": self.emitted,
                "flushes": dict(self.flushes),
            }
        }


def _epoch_ms(instant: str) -> int:
    """Epoch milliseconds of a progress's ISO 8601 instant (``2026-01-01T00:01:20.000Z``)."""
    return int(datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp() * 1000)
