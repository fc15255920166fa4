"""The per-key side of a lookup join, run by ``mapInArrow`` in each executor's Python worker (NONE and PARTIAL).

Each worker keeps one ``CachingLookup`` per lookup table of the application (its source connection and, for
PARTIAL, its cache), for as long as Spark reuses the worker: later tasks and micro-batches of the same
application find the cache warm. After each partition the worker leaves a snapshot of its metrics in the job's
metrics folder, one file a worker, overwritten; the driver adds them up.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from spark_tables.core.lookup.options import CacheMode, LookupOptions
from spark_tables.core.lookup.table import SourceTable
from spark_tables.jobs.exchange_files import write_result
from spark_tables.jobs.lookup.cache import DefaultLookupCache
from spark_tables.jobs.lookup.caching_lookup import CachingLookup
from spark_tables.jobs.lookup.metrics import COUNTER_NAMES, CacheMetrics
from spark_tables.jobs.lookup.source import source_for

_WORKER_LOOKUPS: dict[str, CachingLookup] = {}
#: What each job's partitions counted in this worker, by the job's metrics folder: a worker's cache outlives a
#: job (the micro-batches of a stream share it), its counters are reported per job.
_JOB_COUNTS: dict[str, dict[str, float]] = {}
_WORKER_LOCK = threading.Lock()


def _seconds(delta: datetime.timedelta | None) -> float | None:
    return delta.total_seconds() if delta is not None else None


def caching_lookup(source: SourceTable, options: LookupOptions) -> CachingLookup:
    """A lookup through the FLIP's caching function: with a ``DefaultLookupCache`` for PARTIAL, none for NONE;
    loading through the source's ``lookup_async`` with ``lookup.async``, else its ``lookup_many`` and ``lookup``."""
    cache = None
    if options.cache is CacheMode.PARTIAL:
        cache = DefaultLookupCache(
            expire_after_access=_seconds(options.expire_after_access),
            expire_after_write=_seconds(options.expire_after_write),
            max_rows=options.max_rows,
            cache_missing_key=options.cache_missing_key,
        )
    lookup_source = source_for(source)
    lookup = CachingLookup(
        lookup_source.lookup,
        cache,
        CacheMetrics(),
        max_retries=options.max_retries,
        load_many=lookup_source.lookup_many,
        load_async=lookup_source.lookup_async if options.async_lookup else None,
        async_capacity=options.async_capacity,
    )
    lookup.open()
    return lookup


@dataclass(frozen=True)
class PartitionLookup:
    """What ``mapInArrow`` ships to the workers: which lookup, how probe rows match it, and the output's shape.

    ``lookup_id`` names the worker's lookup (application, table, options); ``value_names`` and ``value_types``
    are the lookup table's value columns appended to each probe row, with their Arrow types.
    """

    lookup_id: str
    name: str
    source: SourceTable
    options: dict[str, str]
    on: tuple[str, ...]
    value_names: tuple[str, ...]
    value_types: tuple[pa.DataType, ...]
    inner: bool
    metrics_folder: str

    def worker_lookup(self) -> CachingLookup:
        with _WORKER_LOCK:
            lookup = _WORKER_LOOKUPS.get(self.lookup_id)
            if lookup is None:
                lookup = _WORKER_LOOKUPS[self.lookup_id] = caching_lookup(
                    self.source, LookupOptions.from_options(self.options)
                )
            return lookup

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        lookup = self.worker_lookup()
        before = lookup.metrics.snapshot()
        try:
            for batch in batches:
                yield self.join(batch, lookup)
        finally:
            self.leave_metrics(lookup, before)

    def join(self, batch: pa.RecordBatch, lookup: CachingLookup) -> pa.RecordBatch:
        """Each probe row once per row its key has (once with nulls if none, unless inner); a null key has none."""
        keys = list(zip(*(batch.column(name).to_pylist() for name in self.on), strict=True))
        lookup.prefetch([key for key in keys if None not in key])
        indexes: list[int] = []
        joined: list[tuple] = []  # the value rows, one a probe row of the output, turned into columns at the end
        unmatched = () if self.inner else ((None,) * len(self.value_types),)
        for index, key in enumerate(keys):
            rows = (None not in key and lookup.lookup(key)) or unmatched
            indexes.extend([index] * len(rows))
            joined.extend(rows)
        lookup.clear_prefetched()
        probe = batch.take(pa.array(indexes, type=pa.int64()))
        values = zip(*joined, strict=True) if joined else ([] for _ in self.value_types)
        appended = [pa.array(list(column), type=kind) for column, kind in zip(values, self.value_types, strict=True)]
        return pa.RecordBatch.from_arrays([*probe.columns, *appended], names=[*batch.schema.names, *self.value_names])

    def leave_metrics(self, lookup: CachingLookup, before: dict[str, float]) -> None:
        """Write this worker's counts for the job so far, and its cache's gauges as they are now."""
        now = lookup.metrics.snapshot()
        with _WORKER_LOCK:
            counts = _JOB_COUNTS.setdefault(self.metrics_folder, dict.fromkeys(COUNTER_NAMES, 0))
            for name in COUNTER_NAMES:
                counts[name] += now[name] - before[name]
            counts = dict(counts)
        worker = f"{socket.gethostname()}-{os.getpid()}"
        snapshot = {"worker": worker, "lookup": self.name, **now, **counts}
        write_result(f"{self.metrics_folder.rstrip('/')}/{self.name}-{worker}.json", json.dumps(snapshot))
