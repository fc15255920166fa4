"""The per-key side of a lookup join, run by ``mapInArrow`` in each executor's Python worker (NONE and PARTIAL).

Each worker keeps one ``CachingLookup`` per lookup table of the application (its source connection and, for
PARTIAL, its cache), for as long as Spark reuses the worker: later tasks and micro-batches of the same
application find the cache warm. After each partition the worker leaves a snapshot of its metrics in the job's
metrics folder, one file a worker, overwritten; the driver adds them up.

With PARTIAL, each Arrow batch is joined by its distinct keys: Arrow encodes the key columns (``DistinctKeys``),
the lookup answers each distinct key once for all its rows when the cache holds it
(``CachingLookup.lookup_distinct``), and Arrow ``take`` builds the output, in the probe rows' order. Counts and
rows are those of key-by-key lookups but where the cache would lose a key during the batch: a key evicted (by
``lookup.partial-cache.max-rows``) or expired between two of its rows is still a hit for the later ones, where key
by key they would miss and load it again; the keys the cache holds are looked up before the batch's loads can
evict them; the cache's recency order after a batch follows that order (see ``caching_lookup``). NONE looks every
row's key up, in row order, as before.
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
from spark_tables.jobs import files
from spark_tables.jobs.lookup.cache import DefaultLookupCache
from spark_tables.jobs.lookup.caching_lookup import CachingLookup
from spark_tables.jobs.lookup.distinct_keys import DistinctKeys
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
        keys = DistinctKeys.of(batch, self.on) if lookup.cached else DistinctKeys.each_row(batch, self.on)
        answers = lookup.lookup_distinct(keys.keys, keys.occurrences)
        return keys.join(batch, answers, self.value_names, self.value_types, inner=self.inner)

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
        files.write_text(f"{self.metrics_folder.rstrip('/')}/{self.name}-{worker}.json", json.dumps(snapshot))
