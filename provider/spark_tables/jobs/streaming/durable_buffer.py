"""FLIP-365's buffer, durable, without a second stateful operator: the driver's buffer (``memory_buffer``) with a
log of what it holds in the checkpoint.

foreachBatch hands every micro-batch's changes to the driver anyway (the PostgreSQL sink writes them from there).
The durable buffer keeps the latest change of each sink key in the driver, as the memory buffer does, and before
the batch's function returns (before Spark commits the batch) it writes the batch's changes into
``<checkpoint>-buffer-log/<batch id>.arrow``, in Arrow's IPC format: Spark's own Arrow rows of the changes, read
back as data (a checkpoint may be on storage others can write: nothing read there is unpickled or imported). A
flush writes the buffer in one transaction, then removes the log. So what is buffered is always either in the log
or in the sink:

- a driver that dies between flushes leaves the log: the next run reads it back, in batch order, before its first
  batch, and flushes it with its first flush;
- a batch that Spark runs again after a failure (it was logged but not committed) writes the same file again: the
  log is idempotent by batch id, and the aggregation's state gives the batch the same changes;
- a driver that dies after a flush's transaction but before the log went writes the same latest values again at
  the next flush, which an upsert makes harmless.

Unlike the memory buffer, it is not bounded by ``state.backend.cache.max-entries-num`` (the state store's buffer is
not either): it holds what the next flush writes, which the PostgreSQL sink collects in the driver in any case.
What it costs a micro-batch: one small file (the batch's changed keys), against the state store's buffer's
second transform-with-state operator, shuffle by bucket and RocksDB store.
"""

from __future__ import annotations

import logging
import re

import pyarrow as pa

from spark_tables.core.errors import JobError
from spark_tables.core.streaming.flush import LOG, FlushOptions
from spark_tables.jobs import files
from spark_tables.jobs.streaming.buffer import CAUSES
from spark_tables.jobs.streaming.clock import Clock
from spark_tables.jobs.streaming.memory_buffer import MemoryBuffer
from spark_tables.jobs.streaming.sinks.postgres_upsert import PostgresSinkWriter

log = logging.getLogger(__name__)

#: The suffix of the folder beside a sink query's checkpoint where the buffer's log is.
LOG_FOLDER = "-buffer-log"
#: A log file's name: the batch id, zero-padded so that names sort in batch order.
LOG_FILE = "{batch_id:020d}.arrow"
LOG_FILE_NAME = re.compile(r"\d{20}\.arrow")


class DurableBuffer(MemoryBuffer):
    """The sink's writer and the query's buffer: the memory buffer's, each batch's changes logged until flushed."""

    STORE = LOG
    FLUSH_CAUSES = CAUSES  # it is never full

    def __init__(self, writer: PostgresSinkWriter, options: FlushOptions, clock: Clock, checkpoint: str) -> None:
        super().__init__(writer, options, clock, checkpoint)
        self.max_entries = None
        self.log_folder = f"{checkpoint.rstrip('/')}{LOG_FOLDER}"

    def _recover(self) -> None:
        """At the query's start: the changes a run that ended without flushing left in the log, in batch order;
        they are due, so the first batch, or the first request, flushes them."""
        logged = files.data_file_names(self.log_folder)
        foreign = [name for name in logged if not LOG_FILE_NAME.fullmatch(name)]
        if foreign:
            raise JobError(
                f"durable buffer of sink {self.sink.name}: {self.log_folder}/{foreign[0]} is not one of its log files "
                f"(<batch id>.arrow), and is not read: move it out of that folder, then run again"
            )
        for name in logged:
            with pa.ipc.open_stream(files.read_bytes(f"{self.log_folder}/{name}")) as log_file:
                self.entries.update(self.writer.by_key(log_file.read_all()))
        if self.entries:
            self.since_ms = 0
            log.info(
                "durable buffer of sink %s: %d change(s) of batches %d to %d, left by the run before, go out with "
                "the first flush",
                self.sink.name,
                len(self.entries),
                int(logged[0].split(".")[0]),
                int(logged[-1].split(".")[0]),
            )

    def _keep(self, batch_id: int, rows: pa.Table) -> None:
        out = pa.BufferOutputStream()
        with pa.ipc.new_stream(out, rows.schema) as stream:
            stream.write_table(rows)
        files.write_bytes(f"{self.log_folder}/{LOG_FILE.format(batch_id=batch_id)}", out.getvalue().to_pybytes())

    def _forget(self) -> None:
        files.remove(self.log_folder)
