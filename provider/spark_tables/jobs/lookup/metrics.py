"""Lookup cache metrics: FLIP-221's CacheMetricGroup as thread-safe counters and gauges, summed over workers.

Each executor Python worker keeps one ``CacheMetrics``; the driver adds up their snapshots with ``aggregate``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from spark_tables.core.lookup.snapshot import UNINITIALIZED

#: The FLIP's counters, then its gauges.
METRIC_NAMES = (
    "hitCount",
    "missCount",
    "loadCount",
    "numLoadFailure",
    "latestLoadTime",
    "numCachedRecords",
    "numCachedBytes",
)
#: The counters, which only grow; the other metrics are gauges of the cache as it is now.
COUNTER_NAMES = ("hitCount", "missCount", "loadCount", "numLoadFailure")
_SUMMED_NAMES = ("hitCount", "missCount", "loadCount", "numLoadFailure", "numCachedRecords", "numCachedBytes")


def _initial_values() -> dict[str, float | int]:
    return {**dict.fromkeys(METRIC_NAMES, 0), "latestLoadTime": UNINITIALIZED}


def _hit_rate(hits: float, misses: float) -> float:
    lookups = hits + misses
    return hits / lookups if lookups else 0.0


class CacheMetrics:
    """Counters and gauges of one lookup cache, shared by the threads of a worker; every value starts at 0 but
    ``latestLoadTime``, which is ``UNINITIALIZED`` (-1) until the first load.

    ``latestLoadTime`` is in milliseconds; ``numCachedRecords`` counts rows, not keys.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values = _initial_values()

    def _add_one(self, name: str) -> None:
        with self._lock:
            self._values[name] += 1

    def hit(self, count: int = 1) -> None:
        """Count ``count`` hits: a batch's later lookups of a cached key count together (see ``CachingLookup``)."""
        with self._lock:
            self._values["hitCount"] += count

    def miss(self) -> None:
        self._add_one("missCount")

    def loaded(self, milliseconds: float) -> None:
        """Count a successful load, which took ``milliseconds`` (retries included)."""
        with self._lock:
            self._values["loadCount"] += 1
            self._values["latestLoadTime"] = milliseconds

    def load_failed(self) -> None:
        self._add_one("numLoadFailure")

    def cached(self, records: int, nbytes: int) -> None:
        """Set the gauges of what the cache holds now."""
        with self._lock:
            self._values["numCachedRecords"] = records
            self._values["numCachedBytes"] = nbytes

    def snapshot(self) -> dict[str, float | int]:
        """The values under their FLIP names, plus ``hitRate`` (hits over lookups, 0.0 before any lookup)."""
        with self._lock:
            values = dict(self._values)
        values["hitRate"] = _hit_rate(values["hitCount"], values["missCount"])
        return values


def aggregate(snapshots: Iterable[Mapping[str, float | int]]) -> dict[str, float | int]:
    """One snapshot for several caches (one per executor worker): sums, the largest ``latestLoadTime`` (still
    ``UNINITIALIZED`` if none loaded), the hit rate of the sums."""
    total = _initial_values()
    for snapshot in snapshots:
        for name in _SUMMED_NAMES:
            total[name] += snapshot[name]
        total["latestLoadTime"] = max(total["latestLoadTime"], snapshot["latestLoadTime"])
    total["hitRate"] = _hit_rate(total["hitCount"], total["missCount"])
    return total
