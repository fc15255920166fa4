"""FLIP-221's CachingLookupFunction: a lookup through a cache, loading what it misses with retries.

Metrics follow Flink: the cache counts hits and misses; a load that succeeds counts once in ``loadCount``
however many attempts it took, and sets ``latestLoadTime`` to the time they took together; a load whose
every attempt failed counts once in ``numLoadFailure`` and not in ``loadCount``. With a cache that is
always filled after a miss (PARTIAL), ``loadCount`` plus ``numLoadFailure`` equals ``missCount``. Without a
cache (NONE), every lookup is a load and counts neither a hit nor a miss.

A join looks a batch of rows up by distinct key (``lookup_distinct``): it first ``prefetch``es the batch's keys,
then looks each distinct key up once for all its occurrences when the cache holds its rows, the keys the cache
held first, then those it lacked, each group in order of first occurrence; each miss (each lookup, without a
cache) takes one prefetched result of its key as its load. Hits, misses, loads, load failures and the rows
returned are those of key-by-key lookups of the batch's rows in order:

- a key found in the cache, or whose miss loaded rows the cache then keeps, is one ``get_if_present`` for all its
  occurrences in the batch: the first counts a hit or a miss (and its load), the n - 1 others hits;
- a key whose result the cache does not keep (an empty result with ``lookup.partial-cache.cache-missing-key``
  off) is looked up again at each of its occurrences, as key by key: each a miss and a load of its own, whose
  rows go to that occurrence;
- without a cache (NONE), every occurrence is a load.

Where they differ: key by key, a key could leave the cache between two of its occurrences in a batch, evicted by
``max_rows`` (a batch with more distinct keys than the cache holds) or expired, and its next occurrence would miss
and load again; by distinct key it is looked up once a batch, and its later occurrences are hits. Looking the
cached keys up first also keeps the batch's loads from evicting one of them before its turn (key by key, a miss
and a load of its own). The cache's recency order after a batch follows that order, not the keys' last
occurrences. A load failing every attempt counts in ``numLoadFailure`` and raises ``LookupFailed``, as key by
key; the keys looked up before its key have counted all their occurrences by then, key by key only those before
the failing row.

What is prefetched, and how:

- with ``load_async`` (``lookup.async``): the keys the cache lacks, each once (without a cache, every key of the
  batch, duplicates too), each loaded by ``load_async`` with its own retries, at most ``async_capacity`` at once;
  a load whose every attempt failed is kept as its failure, which the lookup of that key then raises;
- else, with a cache and ``load_many``: the keys the cache lacks, each once, in one request, whose time each
  load counts; if the request fails after its retries, nothing is prefetched and each miss loads alone;
- else nothing: each lookup loads alone (NONE's query per row).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from spark_tables.core.errors import JobError, one_line
from spark_tables.jobs.lookup.cache import Key, LookupCache, Rows
from spark_tables.jobs.lookup.metrics import CacheMetrics
from spark_tables.jobs.lookup.retries import Backoff, retrying, retrying_async

log = logging.getLogger(__name__)

#: Consecutive lookups of one key in a batch: the rows they returned, and how many lookups returned them.
Run = tuple[Rows, int]


class LookupFailed(JobError):
    """Every attempt to load the rows of a key failed; the message names the key and the last error."""


class CachingLookup:
    """The rows of a key from ``cache``, else loaded (by ``load``, or fetched ahead), which the cache then keeps.

    Lookups are safe to share between threads; a ``prefetch`` and the lookups that take what it fetched belong to
    one thread at a time (a worker's join of one batch). Two threads missing the same key at once both load it:
    both loads and misses count, the later put wins.
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
        async_capacity: int = 100,
    ) -> None:
        self._load = load
        self._load_async = load_async
        self._cache = cache
        self._metrics = metrics
        self._max_retries = max_retries
        self._retrying = functools.partial(retrying, max_retries=max_retries, backoff=backoff, sleep=sleep)
        self._retrying_async = functools.partial(
            retrying_async, max_retries=max_retries, backoff=backoff, sleep=sleep_async
        )
        self._clock = clock
        self._load_many = load_many
        self._async_capacity = async_capacity
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Per key, the results fetched ahead and not yet taken, each with how long its load took (ms): rows, or
        #: the error of a load that failed. A miss takes the first.
        self._prefetched: dict[Key, list[tuple[Sequence[Sequence[Any]] | Exception, float]]] = {}

    @property
    def metrics(self) -> CacheMetrics:
        return self._metrics

    @property
    def cached(self) -> bool:
        """Whether lookups go through a cache (PARTIAL), not each to the source (NONE)."""
        return self._cache is not None

    def open(self) -> None:
        if self._cache is not None:
            self._cache.open(self._metrics)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
        if self._loop is not None:
            self._loop.close()
            self._loop = None

    def prefetch(self, keys: Sequence[Key]) -> Sequence[Key]:
        """Fetch ahead the results of the lookups of ``keys`` that will load (see the module's doc); the keys it
        fetched, or tried to: none when each lookup loads alone."""
        if self._load_async is None and (self._cache is None or self._load_many is None):
            return ()  # each lookup loads alone
        if self._cache is not None:
            keys = [key for key in dict.fromkeys(keys) if not self._cache.contains(key)]
        if not keys:
            return ()
        if self._load_async is not None:
            self._event_loop().run_until_complete(self._prefetch_async(keys))
        else:
            self._prefetch_together(keys)
        return keys

    def _prefetch_together(self, keys: Sequence[Key]) -> None:
        """Load ``keys`` in one ``load_many`` request; nothing is prefetched if it fails after its retries."""
        started = self._clock()
        try:
            loaded = self._retrying(
                functools.partial(self._load_many, keys), what=f"lookup of {len(keys)} keys together"
            )
        except Exception as error:
            log.warning(
                "the lookup of %d keys together failed after its retries (%s): each of them loads alone",
                len(keys),
                one_line(error),
            )
            return
        milliseconds = (self._clock() - started) * 1000
        self._prefetched = {key: [(rows, milliseconds)] for key, rows in zip(keys, loaded, strict=True)}

    async def _prefetch_async(self, keys: Sequence[Key]) -> None:
        """Load each of ``keys`` through ``load_async``, at most ``async_capacity`` at once."""
        slots = asyncio.Semaphore(self._async_capacity)

        async def load(key: Key) -> tuple[Sequence[Sequence[Any]] | Exception, float]:
            async with slots:
                started = self._clock()
                try:
                    loaded: Sequence[Sequence[Any]] | Exception = await self._retrying_async(
                        functools.partial(self._load_async, key), what=f"lookup of key {key!r}"
                    )
                except Exception as error:
                    loaded = error
                return loaded, (self._clock() - started) * 1000

        results = await asyncio.gather(*(load(key) for key in keys))
        self._prefetched = {}
        for key, result in zip(keys, results, strict=True):
            self._prefetched.setdefault(key, []).append(result)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """This lookup's event loop, kept for its life: an async client's connections belong to the loop they
        were opened on."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop

    def clear_prefetched(self) -> None:
        """Drop what ``prefetch`` fetched and no lookup took."""
        self._prefetched = {}

    def lookup_distinct(self, keys: Sequence[Key], occurrences: Sequence[int]) -> list[tuple[Run, ...]]:
        """Look up a batch whose distinct ``keys``, in order of first occurrence, occur ``occurrences`` times each:
        per key, the runs of its lookups in order (see the module's doc). Raises ``LookupFailed`` as ``lookup``."""
        if self._cache is None:  # a load per occurrence, which load_async fetches ahead
            fetched = self.prefetch([key for key, times in zip(keys, occurrences, strict=True) for _ in range(times)])
        else:
            fetched = self.prefetch(keys)
        # The keys the cache holds go first: the loads of the others, which may evict, cannot drop one of them
        # before its turn (it would load alone).
        lacking = set(fetched)
        order = [i for i, key in enumerate(keys) if key not in lacking] + [
            i for i, key in enumerate(keys) if key in lacking
        ]
        answers: list[tuple[Run, ...]] = [()] * len(keys)
        try:
            for i in order:
                answers[i] = self._lookups(keys[i], occurrences[i])
        finally:
            self.clear_prefetched()
        return answers

    def _lookups(self, key: Key, times: int) -> tuple[Run, ...]:
        """``times`` lookups of ``key`` one after another: once the cache holds the key, the lookups left are hits,
        counted without asking the cache again."""
        runs: list[Run] = []
        while times:
            rows, hit = self._look_up(key)
            times -= 1
            held = times > 0 and self._cache is not None and (hit or self._cache.contains(key))
            repeated = times if held else 0
            if repeated:
                self._metrics.hit(repeated)
            runs.append((rows, 1 + repeated))
            times -= repeated
        return tuple(runs)

    def lookup(self, key: Key) -> Rows:
        """The rows of ``key``; raises ``LookupFailed`` when every attempt to load them failed."""
        return self._look_up(key)[0]

    def _look_up(self, key: Key) -> tuple[Rows, bool]:
        """The rows of ``key``, and whether the cache had them."""
        cached = self._cache.get_if_present(key) if self._cache is not None else None
        if cached is not None:
            return cached, True
        prefetched = self._prefetched.get(key)
        if prefetched:
            loaded, milliseconds = prefetched.pop(0)
            if isinstance(loaded, Exception):
                raise self._failed(key, loaded) from loaded
            return self._keep(key, loaded, milliseconds=milliseconds), False
        started = self._clock()
        try:
            loaded = self._retrying(functools.partial(self._load, key), what=f"lookup of key {key!r}")
        except Exception as error:
            raise self._failed(key, error) from error
        return self._keep(key, loaded, milliseconds=(self._clock() - started) * 1000), False

    def _keep(self, key: Key, loaded: Sequence[Sequence[Any]], *, milliseconds: float) -> Rows:
        """Count a load that took ``milliseconds``, cache its rows and return them, frozen."""
        rows = tuple(map(tuple, loaded))
        self._metrics.loaded(milliseconds)
        if self._cache is not None:
            self._cache.put(key, rows)
        return rows

    def _failed(self, key: Key, error: Exception) -> LookupFailed:
        self._metrics.load_failed()
        attempts = self._max_retries + 1
        return LookupFailed(f"lookup of key {key!r} failed after {attempts} attempt(s): {one_line(error)}")
