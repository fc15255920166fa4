"""FLIP-365's options, with its names: how long an idempotent operator's output may wait, and where it waits.

``execution.flush.max-interval`` turns buffering on: the latest output of each key is kept and emitted at most
once per interval (unset: every change goes out with its micro-batch, as without this capability).
``execution.flush.memory-buffer-only`` keeps the buffer in memory instead of the state store, bounded by
``state.backend.cache.max-entries-num`` entries (a full buffer flushes).

Where a durable buffer keeps what it holds is this provider's own option, ``execution.flush.durable-store``
(``buffer_store``): ``log``, the driver's buffer with a log in the checkpoint, in front of a PostgreSQL sink in a
job of its own (the default there); ``state-store``, a transform-with-state operator in front of the sink (the
default for a catalog table, and in session mode, where foreachBatch runs in the Spark Connect server).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.errors import SpecError

MAX_INTERVAL_OPTION = "execution.flush.max-interval"
MEMORY_BUFFER_ONLY_OPTION = "execution.flush.memory-buffer-only"
MAX_ENTRIES_OPTION = "state.backend.cache.max-entries-num"
DURABLE_STORE_OPTION = "execution.flush.durable-store"
#: Where a buffer keeps what it holds: the memory buffer's, and the durable buffers' (``DURABLE_STORES``).
MEMORY, LOG, STATE_STORE = "memory", "log", "state-store"
DURABLE_STORES = (LOG, STATE_STORE)
#: The memory buffer's bound when the job does not set one.
DEFAULT_MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class FlushOptions:
    """Whether and how an idempotent operator's output is buffered: ``max_interval`` None means not at all."""

    max_interval: timedelta | None = None
    memory_buffer_only: bool = False
    max_entries: int = DEFAULT_MAX_ENTRIES
    #: ``execution.flush.durable-store``; None: the sink and the mode choose (``buffer_store``).
    durable_store: str | None = None

    @property
    def enabled(self) -> bool:
        return self.max_interval is not None

    @property
    def max_interval_ms(self) -> int:
        if self.max_interval is None:
            raise SpecError(f"{MAX_INTERVAL_OPTION} is not set: buffering is off")
        return whole_milliseconds(self.max_interval)

    @classmethod
    def from_configuration(cls, configuration: dict[str, Any]) -> FlushOptions:
        """The options a job's configuration sets; ``SpecError`` naming the first bad one."""
        interval = configuration.get(MAX_INTERVAL_OPTION)
        memory_only = _boolean(configuration.get(MEMORY_BUFFER_ONLY_OPTION, "false"), MEMORY_BUFFER_ONLY_OPTION)
        max_entries = _positive(configuration.get(MAX_ENTRIES_OPTION, DEFAULT_MAX_ENTRIES), MAX_ENTRIES_OPTION)
        store = configuration.get(DURABLE_STORE_OPTION)
        if store is not None and store not in DURABLE_STORES:
            raise SpecError(f"{DURABLE_STORE_OPTION}={store!r} is invalid: use {' or '.join(DURABLE_STORES)}")
        if store is not None and memory_only:
            raise SpecError(
                f"{DURABLE_STORE_OPTION} names a durable buffer's store, but {MEMORY_BUFFER_ONLY_OPTION} is true: "
                "leave one of them out"
            )
        if interval is None or str(interval).strip() == "":
            given = [
                name
                for name, is_set in (
                    (MEMORY_BUFFER_ONLY_OPTION, memory_only),
                    (MAX_ENTRIES_OPTION, MAX_ENTRIES_OPTION in configuration),
                    (DURABLE_STORE_OPTION, store is not None),
                )
                if is_set
            ]
            if given:
                raise SpecError(
                    f"{given[0]} applies to buffered output: set {MAX_INTERVAL_OPTION} too, or leave it out"
                )
            return cls()
        max_interval = parse_duration(interval, MAX_INTERVAL_OPTION)
        if not whole_milliseconds(max_interval):
            raise SpecError(
                f"{MAX_INTERVAL_OPTION}={interval!r} is too short: give at least 1 ms, or leave it unset for no "
                "buffering"
            )
        return cls(max_interval, memory_only, max_entries, store)

    def refused_in_session_mode(self) -> str | None:
        """Why a streaming job with these options cannot run in session mode (one line, with what to do), or None.

        The memory buffer, and the durable buffer's log, keep a query's output in the process that runs its
        foreachBatch function, and flush it on the job's requests: over Spark Connect that process is the server's,
        out of the job's reach.
        """
        if not (self.memory_buffer_only or self.durable_store == LOG):
            return None
        option = MEMORY_BUFFER_ONLY_OPTION if self.memory_buffer_only else f"{DURABLE_STORE_OPTION}={LOG}"
        return (
            f"{option} does not run in session mode: the buffer would live in the Spark Connect server's Python, "
            "where the job cannot flush it: leave it unset (the buffer is then in Spark's state store), or use a "
            "spark connection (spark-submit)"
        )


def buffer_store(options: FlushOptions, sink: str, postgres_sink: bool, session_mode: bool) -> str:
    """Where the buffer of sink ``sink`` keeps what it holds (``MEMORY``, ``LOG`` or ``STATE_STORE``); ``SpecError``
    for a store the sink cannot have. The log and the memory buffer live in the process that runs
    foreachBatch's function and need the sink written from there: a PostgreSQL sink's, in a job of its own."""
    store = MEMORY if options.memory_buffer_only else options.durable_store
    if store is None:
        return LOG if postgres_sink and not session_mode else STATE_STORE
    if store in (MEMORY, LOG) and not postgres_sink:
        option = MEMORY_BUFFER_ONLY_OPTION if store == MEMORY else f"{DURABLE_STORE_OPTION}={LOG}"
        raise SpecError(
            f"sink {sink}: {option} buffers in front of a PostgreSQL sink only (a catalog table takes a version per "
            "flush, a Kafka topic a message a key, from a micro-batch): leave it unset"
        )
    return store


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise SpecError(f"{name}={value!r} is invalid: give true or false")
    return text == "true"


def _positive(value: Any, name: str) -> int:
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        raise SpecError(f"{name}={value!r} is invalid: give a whole number of entries from 1")
    return int(text)
