"""FLIP-221's LookupCache: the rows an external database returned for a key, kept in an executor Python worker.

One cache per worker, shared by its threads: every operation takes the cache's lock. Keys are tuples of
Python values; the rows of a key are a tuple of tuples, so nothing handed out can be changed by a caller.
"""

from __future__ import annotations

import datetime
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from spark_tables.jobs.lookup.metrics import CacheMetrics

Key = tuple[Any, ...]
Rows = tuple[tuple[Any, ...], ...]


class LookupCache(ABC):
    """What a lookup join asks of its cache. ``get_if_present`` counts the hits and misses, as Flink's does."""

    @abstractmethod
    def open(self, metrics: CacheMetrics) -> None:
        """Start reporting to ``metrics``."""

    @abstractmethod
    def get_if_present(self, key: Key) -> Rows | None:
        """The rows cached for ``key``, or None if none are: an empty tuple is a key known to have no rows."""

    @abstractmethod
    def put(self, key: Key, rows: Iterable[Iterable[Any]]) -> Rows | None:
        """Cache ``rows`` for ``key``; return the rows cached for it before, if any."""

    @abstractmethod
    def invalidate(self, key: Key) -> None:
        """Forget ``key``."""

    @abstractmethod
    def size(self) -> int:
        """The number of keys cached."""

    def contains(self, key: Key) -> bool:
        """Whether ``key`` is cached now, counting neither a hit nor a miss and leaving its recency as it is.

        Not in the FLIP: the join asks it to fetch a batch's missing keys together. A cache that cannot tell
        says no, and the batch's keys are all fetched (the later lookups still count their hits and misses).
        """
        return False

    def close(self) -> None:  # noqa: B027 - optional hook: most caches have nothing to release
        """Release what the cache holds outside the process: nothing by default."""


#: Exact types of values holding no object ``deep_sizeof`` would count: a container's values of these types are
#: counted without a turn of its loop each (a cache entry's values mostly are).
_PLAIN_VALUES = frozenset(
    {
        type(None),
        bool,
        int,
        float,
        str,
        bytes,
        Decimal,
        datetime.date,
        datetime.datetime,
        datetime.time,
        datetime.timedelta,
    }
)


def deep_sizeof(*objects: object) -> int:
    """Bytes of ``objects`` and of everything inside their tuples, lists, sets and dicts, each object counted once."""
    found: dict[int, object] = {}
    pending = list(objects)
    while pending:
        item = pending.pop()
        if id(item) in found:
            continue
        found[id(item)] = item
        if isinstance(item, tuple | list | set | frozenset):
            for part in item:
                if type(part) in _PLAIN_VALUES:
                    found[id(part)] = part
                else:
                    pending.append(part)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
    return sum(map(sys.getsizeof, found.values()))


@dataclass(slots=True)
class _Entry:
    rows: Rows
    written_at: float
    accessed_at: float
    nbytes: int


class DefaultLookupCache(LookupCache):
    """Flink's DefaultLookupCache: keys expire after access or after write, the least recently used go beyond
    ``max_rows`` keys (like Guava's maximumSize, the limit counts keys, not rows).

    Entries sit in an OrderedDict in access order (reads and writes), and, with ``expire_after_write``, in a
    second one in write order: each operation first drops the expired entries at the front of both, so expired
    entries are reclaimed without being touched and every operation stays O(1) amortized. An entry expires once
    its age reaches the limit. Until ``open``, the cache counts into metrics of its own.
    """

    def __init__(
        self,
        *,
        expire_after_access: float | None = None,
        expire_after_write: float | None = None,
        max_rows: int | None = None,
        cache_missing_key: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if expire_after_access is None and expire_after_write is None and max_rows is None:
            raise ValueError("set expire_after_access, expire_after_write or max_rows: the cache would grow forever")
        for name, limit in (
            ("expire_after_access", expire_after_access),
            ("expire_after_write", expire_after_write),
            ("max_rows", max_rows),
        ):
            if limit is not None and limit < 0:
                raise ValueError(f"{name} is {limit}: it cannot be negative")
        self._expire_after_access = expire_after_access
        self._expire_after_write = expire_after_write
        self._max_rows = max_rows
        self._cache_missing_key = cache_missing_key
        self._clock = clock
        self._lock = threading.Lock()
        self._by_access: OrderedDict[Key, _Entry] = OrderedDict()
        self._by_write: OrderedDict[Key, _Entry] | None = OrderedDict() if expire_after_write is not None else None
        self._records = 0
        self._bytes = 0
        self._metrics = CacheMetrics()

    def open(self, metrics: CacheMetrics) -> None:
        with self._lock:
            self._metrics = metrics
            self._publish()

    def get_if_present(self, key: Key) -> Rows | None:
        with self._lock:
            now = self._clock()
            if self._expire(now):
                self._publish()
            entry = self._by_access.get(key)
            if entry is None:
                self._metrics.miss()
                return None
            entry.accessed_at = now
            self._by_access.move_to_end(key)
            self._metrics.hit()
            return entry.rows

    def contains(self, key: Key) -> bool:
        with self._lock:
            if self._expire(self._clock()):
                self._publish()
            return key in self._by_access

    def put(self, key: Key, rows: Iterable[Iterable[Any]]) -> Rows | None:
        """Cache ``rows``; with ``cache_missing_key`` off, an empty result is not cached and drops what was."""
        frozen_rows = tuple(map(tuple, rows))
        with self._lock:
            now = self._clock()
            self._expire(now)
            previous = self._remove(key)
            if frozen_rows or self._cache_missing_key:
                self._insert(key, _Entry(frozen_rows, now, now, deep_sizeof(key, frozen_rows)))
            self._publish()
            return previous.rows if previous is not None else None

    def invalidate(self, key: Key) -> None:
        with self._lock:
            if self._remove(key) is not None:
                self._publish()

    def size(self) -> int:
        with self._lock:
            if self._expire(self._clock()):
                self._publish()
            return len(self._by_access)

    def _insert(self, key: Key, entry: _Entry) -> None:
        self._by_access[key] = entry
        if self._by_write is not None:
            self._by_write[key] = entry
        self._records += len(entry.rows)
        self._bytes += entry.nbytes
        if self._max_rows is not None:
            while len(self._by_access) > self._max_rows:
                self._remove(next(iter(self._by_access)))

    def _remove(self, key: Key) -> _Entry | None:
        entry = self._by_access.pop(key, None)
        if entry is not None:
            if self._by_write is not None:
                del self._by_write[key]
            self._records -= len(entry.rows)
            self._bytes -= entry.nbytes
        return entry

    def _expire(self, now: float) -> bool:
        """Drop the entries expired at ``now``; whether there were any."""
        expired = False
        if self._by_write is not None:
            while self._by_write:
                key, entry = next(iter(self._by_write.items()))
                if now - entry.written_at < self._expire_after_write:
                    break
                self._remove(key)
                expired = True
        if self._expire_after_access is not None:
            while self._by_access:
                key, entry = next(iter(self._by_access.items()))
                if now - entry.accessed_at < self._expire_after_access:
                    break
                self._remove(key)
                expired = True
        return expired

    def _publish(self) -> None:
        self._metrics.cached(self._records, self._bytes)
