"""FLIP-221's CachingLookupFunction: a lookup through a cache, loading what it misses with retries.

Metrics follow Flink: the cache counts hits and misses; a load that succeeds counts once in ``loadCount``
however many attempts it took, and sets ``latestLoadTime`` to the time they took together; a load whose
every attempt failed counts once in ``numLoadFailure`` and not in ``loadCount``. With a cache that is
always filled after a miss (PARTIAL), ``loadCount`` plus ``numLoadFailure`` equals ``missCount``. Without a
cache (NONE), every lookup is a load and counts neither a hit nor a miss.

With a cache and ``load_many``, a join first ``prefetch``es the keys of a batch of rows that the cache lacks, in
one request to the source; each miss that follows takes its key's prefetched rows once (one load, its
``latestLoadTime`` the whole request's), so misses, loads and the rows returned are those of key-by-key lookups.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from spark_tables.core.errors import JobError, one_line
from spark_tables.jobs.lookup_cache import Key, LookupCache, Rows
from spark_tables.jobs.lookup_metrics import CacheMetrics
from spark_tables.jobs.retries import Backoff, retrying, retrying_async


class LookupFailed(JobError):
    """Every attempt to load the rows of a key failed; the message names the key and the last error."""


class CachingLookup:
    """The rows of a key from ``cache``, else from ``load`` (or ``load_async``), which the cache then keeps.

    Safe to share between threads. Two lookups missing the same key at once both load it (there is no
    waiting for a load in flight, in threads or coroutines): both loads and misses count, the later put wins.
    """

    def __init__(
        self,
        load: Callable[[Key], Sequence[Sequence[Any]]],
        cache: LookupCache | None,
        metrics: CacheMetrics,
        *,
        max_retries: int,
        backoff: Backoff = Backoff(),  # noqa: B008 - a frozen dataclass, safe to share
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        load_async: Callable[[Key], Awaitable[Sequence[Sequence[Any]]]] | None = None,
        sleep_async: Callable[[float], Awaitable[None]] = asyncio.sleep,
        load_many: Callable[[Sequence[Key]], Sequence[Sequence[Sequence[Any]]]] | None = None,
    ) -> None:
        self._load = load
        self._load_async = load_async
        self._cache = cache
        self._metrics = metrics
        self._max_retries = max_retries
        self._backoff = backoff
        self._sleep = sleep
        self._sleep_async = sleep_async
        self._clock = clock
        self._load_many = load_many
        #: Rows fetched ahead for keys the cache lacked, with how long their request took (ms); a miss takes its own.
        self._prefetched: dict[Key, Sequence[Sequence[Any]]] = {}
        self._prefetch_milliseconds = 0.0

    @property
    def metrics(self) -> CacheMetrics:
        return self._metrics

    def open(self) -> None:
        if self._cache is not None:
            self._cache.open(self._metrics)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

    def prefetch(self, keys: Sequence[Key]) -> None:
        """Fetch together the rows of the distinct ``keys`` the cache lacks, for the lookups that follow.

        Only with a cache (NONE sends a query per lookup) and a ``load_many``. If the request fails after its
        retries, nothing is prefetched: each miss then loads its key alone, with retries of its own.
        """
        if self._cache is None or self._load_many is None:
            return
        missing = [key for key in dict.fromkeys(keys) if not self._cache.contains(key)]
        if not missing:
            return
        started = self._clock()
        try:
            loaded = retrying(
                functools.partial(self._load_many, missing),
                max_retries=self._max_retries,
                backoff=self._backoff,
                sleep=self._sleep,
                what=f"lookup of {len(missing)} keys together",
            )
        except Exception:
            return
        self._prefetched = dict(zip(missing, loaded, strict=True))
        self._prefetch_milliseconds = (self._clock() - started) * 1000

    def clear_prefetched(self) -> None:
        """Drop what ``prefetch`` fetched and no lookup took."""
        self._prefetched = {}

    def lookup(self, key: Key) -> Rows:
        """The rows of ``key``; raises ``LookupFailed`` when every attempt to load them failed."""
        cached = self._cache.get_if_present(key) if self._cache is not None else None
        if cached is not None:
            return cached
        prefetched = self._prefetched.pop(key, None)
        if prefetched is not None:
            return self._keep(key, prefetched, milliseconds=self._prefetch_milliseconds)
        started = self._clock()
        try:
            loaded = retrying(
                functools.partial(self._load, key),
                max_retries=self._max_retries,
                backoff=self._backoff,
                sleep=self._sleep,
                what=f"lookup of key {key!r}",
            )
        except Exception as error:
            raise self._failed(key, error) from error
        return self._keep(key, loaded, milliseconds=(self._clock() - started) * 1000)

    async def lookup_async(self, key: Key) -> Rows:
        """``lookup`` through ``load_async``, sleeping between attempts without blocking the event loop."""
        if self._load_async is None:
            raise TypeError("lookup_async needs the CachingLookup to be built with load_async")
        cached = self._cache.get_if_present(key) if self._cache is not None else None
        if cached is not None:
            return cached
        started = self._clock()
        try:
            loaded = await retrying_async(
                functools.partial(self._load_async, key),
                max_retries=self._max_retries,
                backoff=self._backoff,
                sleep=self._sleep_async,
                what=f"lookup of key {key!r}",
            )
        except Exception as error:
            raise self._failed(key, error) from error
        return self._keep(key, loaded, milliseconds=(self._clock() - started) * 1000)

    def _keep(self, key: Key, loaded: Sequence[Sequence[Any]], *, milliseconds: float) -> Rows:
        """Count a load that took ``milliseconds``, cache its rows and return them, frozen."""
        rows = tuple(tuple(row) for row in loaded)
        self._metrics.loaded(milliseconds)
        if self._cache is not None:
            self._cache.put(key, rows)
        return rows

    def _failed(self, key: Key, error: Exception) -> LookupFailed:
        self._metrics.load_failed()
        attempts = self._max_retries + 1
        return LookupFailed(f"lookup of key {key!r} failed after {attempts} attempt(s): {one_line(error)}")
