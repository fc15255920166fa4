"""Lookup cache, its metrics, retries and the caching lookup: expiry, LRU eviction, sizes, counts, threads.

No real time passes: caches and lookups read a fake clock, and retries sleep by advancing it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from spark_tables.core.errors import JobError
from spark_tables.core.lookup.snapshot import UNINITIALIZED, Pointer
from spark_tables.jobs.lookup.cache import DefaultLookupCache, Key, deep_sizeof
from spark_tables.jobs.lookup.caching_lookup import CachingLookup, LookupFailed
from spark_tables.jobs.lookup.metrics import METRIC_NAMES, CacheMetrics, aggregate
from spark_tables.jobs.lookup.retries import Backoff, retrying


class FakeClock:
    """Seconds that pass only when a test says so; ``sleep`` and ``sleep_async`` record and advance."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    async def sleep_async(self, seconds: float) -> None:
        self.sleep(seconds)


class FlakyLoad:
    """A load that fails ``failures`` times, then answers ``rows_of(key)``; it records the keys it was asked."""

    def __init__(self, failures: int = 0, rows_of: Callable[[Key], Sequence[Sequence[Any]]] | None = None) -> None:
        self.failures = failures
        self.rows_of = rows_of or (lambda key: [[key[0], f"row of {key[0]}"]])
        self.keys: list[Key] = []

    def __call__(self, key: Key) -> Sequence[Sequence[Any]]:
        self.keys.append(key)
        if self.failures:
            self.failures -= 1
            raise ConnectionError("database went away\nsecond line of the traceback text")
        return self.rows_of(key)

    async def load_async(self, key: Key) -> Sequence[Sequence[Any]]:
        return self(key)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metrics() -> CacheMetrics:
    return CacheMetrics()


def opened(cache: DefaultLookupCache, metrics: CacheMetrics) -> DefaultLookupCache:
    cache.open(metrics)
    return cache


def gauges(metrics: CacheMetrics) -> tuple[int | float, int | float]:
    snapshot = metrics.snapshot()
    return snapshot["numCachedRecords"], snapshot["numCachedBytes"]


def test_a_cache_needs_a_limit() -> None:
    with pytest.raises(ValueError, match="max_rows"):
        DefaultLookupCache()
    with pytest.raises(ValueError, match="negative"):
        DefaultLookupCache(max_rows=-1)


def test_expire_after_access_keeps_what_is_read_recently(clock: FakeClock) -> None:
    cache = DefaultLookupCache(expire_after_access=10, clock=clock)
    cache.put(("old",), [("o",)])
    cache.put(("idle",), [("i",)])
    for clock.now in range(5, 101, 5):  # written at 0, read every 5 s: never 10 s without access
        assert cache.get_if_present(("old",)) == (("o",),)
    assert cache.get_if_present(("idle",)) is None
    clock.now = 109.9
    assert cache.get_if_present(("old",)) == (("o",),)
    clock.now = 120
    assert cache.get_if_present(("old",)) is None


def test_expire_after_write_drops_an_entry_read_often(clock: FakeClock) -> None:
    cache = DefaultLookupCache(expire_after_write=10, clock=clock)
    cache.put(("k",), [("v",)])
    for clock.now in (3, 6, 9, 9.9):
        assert cache.get_if_present(("k",)) == (("v",),)
    clock.now = 10
    assert cache.get_if_present(("k",)) is None
    assert cache.size() == 0


def test_expire_after_write_applies_when_recently_accessed_entries_come_last_in_lru_order(clock: FakeClock) -> None:
    cache = DefaultLookupCache(expire_after_write=10, expire_after_access=100, clock=clock)
    cache.put(("a",), [("a",)])
    clock.now = 1
    cache.put(("b",), [("b",)])
    for clock.now in (2, 5, 9):  # a: written first, now the most recently used
        assert cache.get_if_present(("a",)) == (("a",),)
    clock.now = 10.5
    assert cache.get_if_present(("a",)) is None
    assert cache.get_if_present(("b",)) == (("b",),)


def test_expired_entries_are_reclaimed_without_being_touched(clock: FakeClock, metrics: CacheMetrics) -> None:
    by_write = opened(DefaultLookupCache(expire_after_write=10, expire_after_access=100, clock=clock), metrics)
    by_write.put(("a",), [("a",)])
    clock.now = 1
    by_write.put(("b",), [("b",)])
    clock.now = 2
    by_write.get_if_present(("a",))  # LRU order b, a; write order a, b
    clock.now = 10.5
    by_write.put(("c",), [("c",), ("c2",)])
    assert by_write.size() == 2
    assert gauges(metrics)[0] == 3  # b's row and c's two

    by_access = DefaultLookupCache(expire_after_access=10, clock=clock)
    by_access.put(("a",), [("a",)])
    by_access.put(("b",), [("b",)])
    clock.now += 8
    by_access.get_if_present(("b",))
    clock.now += 4
    assert by_access.size() == 1
    assert by_access.get_if_present(("b",)) == (("b",),)


def test_max_rows_evicts_the_least_recently_used_key() -> None:
    cache = DefaultLookupCache(max_rows=2)
    cache.put((1,), [(1,)])
    cache.put((2,), [(2,)])
    assert cache.get_if_present((1,)) == ((1,),)  # 2 is now the least recently used
    cache.put((3,), [(3,)])
    assert cache.get_if_present((2,)) is None
    assert cache.get_if_present((1,)) == ((1,),)
    cache.put((4,), [(4,)])
    assert cache.get_if_present((3,)) is None
    assert cache.size() == 2


def test_max_rows_counts_keys_not_rows() -> None:
    cache = DefaultLookupCache(max_rows=1)
    cache.put((1,), [(1, "a"), (1, "b"), (1, "c")])
    assert cache.size() == 1
    assert cache.get_if_present((1,)) == ((1, "a"), (1, "b"), (1, "c"))


@pytest.mark.parametrize("cache_missing_key, loads", [(True, 1), (False, 2)])
def test_cache_missing_key(cache_missing_key: bool, loads: int, metrics: CacheMetrics) -> None:
    load = FlakyLoad(rows_of=lambda key: [])
    cache = DefaultLookupCache(max_rows=10, cache_missing_key=cache_missing_key)
    lookup = CachingLookup(load, cache, metrics, max_retries=0)
    lookup.open()
    assert lookup.lookup(("absent",)) == ()
    assert lookup.lookup(("absent",)) == ()
    assert len(load.keys) == loads
    assert metrics.snapshot()["loadCount"] == loads
    assert cache.size() == (1 if cache_missing_key else 0)


def test_without_cache_missing_key_an_empty_result_drops_the_rows_cached_before() -> None:
    cache = DefaultLookupCache(max_rows=10, cache_missing_key=False)
    cache.put(("k",), [("v",)])
    assert cache.put(("k",), []) == (("v",),)
    assert cache.get_if_present(("k",)) is None


def test_put_replaces_and_invalidate_forgets(metrics: CacheMetrics) -> None:
    cache = opened(DefaultLookupCache(max_rows=10), metrics)
    assert cache.put(("k",), [("v1",)]) is None
    assert cache.put(("k",), [["v2"], ["v3"]]) == (("v1",),)
    assert cache.get_if_present(("k",)) == (("v2",), ("v3",))
    assert gauges(metrics) == (2, deep_sizeof(("k",), (("v2",), ("v3",))))
    cache.invalidate(("k",))
    cache.invalidate(("never cached",))
    assert cache.get_if_present(("k",)) is None
    assert cache.size() == 0
    assert gauges(metrics) == (0, 0)


def test_rows_handed_out_cannot_be_changed() -> None:
    cache = DefaultLookupCache(max_rows=10)
    rows = [[1, "a"]]
    cache.put((1,), rows)
    rows[0].append("changed")
    cached = cache.get_if_present((1,))
    assert cached == ((1, "a"),)
    assert isinstance(cached, tuple) and all(isinstance(row, tuple) for row in cached)


def test_gauges_follow_what_is_cached_and_return_to_zero(metrics: CacheMetrics) -> None:
    cache = opened(DefaultLookupCache(max_rows=2), metrics)
    assert gauges(metrics) == (0, 0)
    cache.put((1,), [(1, "a"), (1, "b")])
    records, nbytes = gauges(metrics)
    assert records == 2
    assert nbytes == deep_sizeof((1,), ((1, "a"), (1, "b"))) > 0
    cache.put((2,), [])  # a missing key: no rows, some bytes
    assert gauges(metrics)[0] == 2
    assert gauges(metrics)[1] > nbytes
    cache.put((3,), [(3, "c")])  # evicts 1
    assert gauges(metrics) == (1, deep_sizeof((2,), ()) + deep_sizeof((3,), ((3, "c"),)))
    cache.put((4,), [(4, "d")])  # evicts 2
    cache.put((5,), [(5, "e")])  # evicts 3
    cache.invalidate((4,))
    cache.invalidate((5,))
    assert gauges(metrics) == (0, 0)


def test_gauges_return_to_zero_after_expiry(clock: FakeClock, metrics: CacheMetrics) -> None:
    cache = opened(DefaultLookupCache(expire_after_write=1, clock=clock), metrics)
    cache.put((1,), [(1,)])
    assert gauges(metrics)[0] == 1
    clock.now = 1
    assert cache.size() == 0
    assert gauges(metrics) == (0, 0)


def test_bytes_grow_with_a_longer_value(metrics: CacheMetrics) -> None:
    cache = opened(DefaultLookupCache(max_rows=10), metrics)
    cache.put((1,), [("x",)])
    short = gauges(metrics)[1]
    cache.put((1,), [("x" * 1001,)])
    assert gauges(metrics)[1] >= short + 1000


def test_deep_sizeof_counts_nested_values_once() -> None:
    text = "a value of some length"
    assert deep_sizeof((text,)) == sys.getsizeof((text,)) + sys.getsizeof(text)
    assert deep_sizeof((text, text)) == sys.getsizeof((text, text)) + sys.getsizeof(text)
    assert deep_sizeof(([1000.5], {"k": b"v"})) > sys.getsizeof(([1000.5], {"k": b"v"})) + sys.getsizeof(b"v")


def test_metrics_of_a_known_key_sequence(clock: FakeClock, metrics: CacheMetrics) -> None:
    def load(key: Key) -> list[tuple[Any, ...]]:
        clock.now += 0.005
        return [(key[0], "row")]

    lookup = CachingLookup(load, DefaultLookupCache(max_rows=2, clock=clock), metrics, max_retries=0, clock=clock)
    lookup.open()
    for key in (1, 2, 1, 3, 1, 2):
        assert lookup.lookup((key,)) == ((key, "row"),)
    # 1 miss, 2 miss, 1 hit, 3 miss (evicts 2), 1 hit, 2 miss (evicts 3)
    snapshot = metrics.snapshot()
    assert {name: snapshot[name] for name in ("hitCount", "missCount", "loadCount", "numLoadFailure")} == {
        "hitCount": 2,
        "missCount": 4,
        "loadCount": 4,
        "numLoadFailure": 0,
    }
    assert snapshot["loadCount"] == snapshot["missCount"]
    assert snapshot["hitRate"] == pytest.approx(2 / 6)
    assert snapshot["latestLoadTime"] == pytest.approx(5)
    assert snapshot["numCachedRecords"] == 2
    assert set(snapshot) == {*METRIC_NAMES, "hitRate"}


def test_without_a_cache_every_lookup_loads_and_nothing_hits_or_misses(metrics: CacheMetrics) -> None:
    load = FlakyLoad()
    lookup = CachingLookup(load, None, metrics, max_retries=0)
    lookup.open()
    for key in (1, 1, 2):
        assert lookup.lookup((key,)) == ((key, f"row of {key}"),)
    snapshot = metrics.snapshot()
    assert (snapshot["hitCount"], snapshot["missCount"], snapshot["loadCount"]) == (0, 0, 3)
    assert snapshot["hitRate"] == 0.0


def test_backoff_delays() -> None:
    assert Backoff().delays(3) == [0.1, 0.2, 0.4]
    assert Backoff(first=1, factor=3, cap=5).delays(4) == [1, 3, 5, 5]
    assert Backoff().delays(0) == []
    with pytest.raises(ValueError, match="negative"):
        Backoff().delays(-1)


def test_retrying_returns_the_first_success_and_raises_the_last_error(clock: FakeClock) -> None:
    assert retrying(lambda: "ok", max_retries=0) == "ok"
    calls = iter([ValueError("first"), KeyError("second")])

    def fail() -> None:
        raise next(calls)

    with pytest.raises(KeyError, match="second"):
        retrying(fail, max_retries=1, sleep=clock.sleep)
    assert clock.slept == [0.1]


def test_a_load_failing_twice_then_succeeding_counts_one_load(
    clock: FakeClock, metrics: CacheMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    load = FlakyLoad(failures=2)
    lookup = CachingLookup(
        load, DefaultLookupCache(max_rows=10), metrics, max_retries=2, sleep=clock.sleep, clock=clock
    )
    lookup.open()
    with caplog.at_level(logging.WARNING, logger="spark_tables.jobs.lookup.retries"):
        assert lookup.lookup((7,)) == ((7, "row of 7"),)
    assert clock.slept == [0.1, 0.2]
    assert len(load.keys) == 3
    snapshot = metrics.snapshot()
    assert (snapshot["missCount"], snapshot["loadCount"], snapshot["numLoadFailure"]) == (1, 1, 0)
    assert snapshot["latestLoadTime"] == pytest.approx(300)  # both waits are part of the load
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 2
    assert "attempt 1 of 3" in warnings[0] and "attempt 2 of 3" in warnings[1]
    assert all("ConnectionError: database went away" in warning for warning in warnings)
    assert not any("second line" in warning for warning in warnings)
    assert lookup.lookup((7,)) == ((7, "row of 7"),)  # now a hit
    assert len(load.keys) == 3


def test_a_load_failing_every_attempt_raises_lookup_failed(clock: FakeClock, metrics: CacheMetrics) -> None:
    load = FlakyLoad(failures=3)
    lookup = CachingLookup(
        load, DefaultLookupCache(max_rows=10), metrics, max_retries=2, sleep=clock.sleep, clock=clock
    )
    lookup.open()
    with pytest.raises(LookupFailed) as failure:
        lookup.lookup(("customer-42",))
    message = str(failure.value)
    assert isinstance(failure.value, JobError)
    assert "'customer-42'" in message and "3 attempt(s)" in message
    assert "ConnectionError: database went away" in message and "\n" not in message
    assert isinstance(failure.value.__cause__, ConnectionError)
    assert clock.slept == [0.1, 0.2]
    snapshot = metrics.snapshot()
    # Flink counts a load only when it succeeds: a failed one counts in numLoadFailure alone.
    assert (snapshot["missCount"], snapshot["loadCount"], snapshot["numLoadFailure"]) == (1, 0, 1)
    assert snapshot["numCachedRecords"] == 0


class ConcurrentLoad(FlakyLoad):
    """``FlakyLoad`` whose async loads yield to the event loop once, recording how many were in flight at most."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__(failures)
        self.in_flight = self.most_in_flight = 0

    async def load_async(self, key: Key) -> Sequence[Sequence[Any]]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)  # the other loads started by then are in flight together
        self.in_flight -= 1
        return self(key)


def _async_lookup(
    load: ConcurrentLoad, clock: FakeClock, metrics: CacheMetrics, cache: DefaultLookupCache | None, capacity: int
) -> CachingLookup:
    def no_sync_load(key: Key) -> Sequence[Sequence[Any]]:
        raise AssertionError(f"key {key} was loaded synchronously")

    lookup = CachingLookup(
        no_sync_load,
        cache,
        metrics,
        max_retries=2,
        clock=clock,
        load_async=load.load_async,
        sleep_async=clock.sleep_async,
        async_capacity=capacity,
    )
    lookup.open()
    return lookup


@pytest.mark.parametrize("capacity", [1, 2, 100])
def test_async_lookups_load_a_batchs_missing_keys_concurrently_up_to_the_capacity(
    clock: FakeClock, metrics: CacheMetrics, capacity: int
) -> None:
    load = ConcurrentLoad()
    lookup = _async_lookup(load, clock, metrics, DefaultLookupCache(max_rows=10, clock=clock), capacity)
    keys = [(1,), (2,), (1,), (3,), (2,)]

    lookup.prefetch(keys)
    rows = [lookup.lookup(key) for key in keys]

    assert rows == [((key[0], f"row of {key[0]}"),) for key in keys]
    assert sorted(load.keys) == [(1,), (2,), (3,)]  # each missing key once
    assert load.most_in_flight == min(capacity, 3)
    counts = metrics.snapshot()
    assert (counts["missCount"], counts["hitCount"], counts["loadCount"]) == (3, 2, 3)  # as key by key


def test_async_lookups_without_a_cache_load_every_row(clock: FakeClock, metrics: CacheMetrics) -> None:
    load = ConcurrentLoad()
    lookup = _async_lookup(load, clock, metrics, None, capacity=100)

    lookup.prefetch([(1,), (1,), (2,)])
    assert [lookup.lookup(key) for key in [(1,), (1,), (2,)]] == [((1, "row of 1"),)] * 2 + [((2, "row of 2"),)]

    assert load.keys.count((1,)) == 2 and load.most_in_flight == 3  # NONE: a query per lookup, all at once
    assert metrics.snapshot()["loadCount"] == 3 and metrics.snapshot()["missCount"] == 0


def test_async_lookups_retry_with_an_async_sleep_then_count_one_failure(
    clock: FakeClock, metrics: CacheMetrics
) -> None:
    load = ConcurrentLoad(failures=2)
    lookup = _async_lookup(load, clock, metrics, DefaultLookupCache(max_rows=10, clock=clock), capacity=1)

    lookup.prefetch([(1,)])
    assert lookup.lookup((1,)) == ((1, "row of 1"),)
    assert clock.slept == [0.1, 0.2] and len(load.keys) == 3
    assert metrics.snapshot()["latestLoadTime"] == pytest.approx(300)  # the attempts and the waits between them

    load.failures = 3
    lookup.prefetch([(2,)])
    with pytest.raises(LookupFailed, match=r"lookup of key \(2,\) failed after 3 attempt\(s\): ConnectionError"):
        lookup.lookup((2,))
    counts = metrics.snapshot()
    assert (counts["missCount"], counts["loadCount"], counts["numLoadFailure"]) == (2, 1, 1)
    lookup.close()


def test_threads_sharing_one_cache(metrics: CacheMetrics) -> None:
    max_rows, keys = 16, 64
    cache = opened(DefaultLookupCache(max_rows=max_rows), metrics)
    errors: list[BaseException] = []

    def hammer(seed: int) -> None:
        chance = random.Random(seed)
        try:
            for step in range(2000):
                key = (chance.randrange(keys),)
                if chance.random() < 0.5:
                    cache.put(key, [(key[0], f"thread {seed} step {step}")] * chance.randrange(3))
                else:
                    rows = cache.get_if_present(key)
                    assert rows is None or isinstance(rows, tuple)
                if step % 100 == 0:
                    assert cache.size() <= max_rows
        except BaseException as error:
            errors.append(error)

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=hammer, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch_interval)
    assert errors == []
    assert cache.size() <= max_rows
    cached = {(key,): cache.get_if_present((key,)) for key in range(keys)}
    held = {key: rows for key, rows in cached.items() if rows is not None}
    assert len(held) == cache.size()
    assert gauges(metrics) == (
        sum(len(rows) for rows in held.values()),
        sum(deep_sizeof(key, rows) for key, rows in held.items()),
    )
    snapshot = metrics.snapshot()
    assert snapshot["hitCount"] + snapshot["missCount"] >= keys


def test_aggregate_sums_counters_and_recomputes_the_hit_rate() -> None:
    first, second = CacheMetrics(), CacheMetrics()
    for _ in range(3):
        first.hit()
    first.miss()
    first.loaded(12.5)
    first.cached(10, 1000)
    second.miss()
    second.loaded(40)
    second.load_failed()
    second.cached(5, 300)
    total = aggregate([first.snapshot(), second.snapshot()])
    assert total == {
        "hitCount": 3,
        "missCount": 2,
        "loadCount": 2,
        "numLoadFailure": 1,
        "latestLoadTime": 40,
        "numCachedRecords": 15,
        "numCachedBytes": 1300,
        "hitRate": 0.6,
    }
    assert aggregate([])["hitRate"] == 0.0


def test_latest_load_time_is_uninitialised_before_any_load() -> None:
    """Flink's LookupCacheMetrics: -1 until a load, which a load of 0 ms can be told from."""
    metrics = CacheMetrics()
    metrics.hit()
    assert metrics.snapshot()["latestLoadTime"] == UNINITIALIZED == -1
    assert aggregate([metrics.snapshot(), CacheMetrics().snapshot()])["latestLoadTime"] == -1
    assert aggregate([])["latestLoadTime"] == -1

    never_loaded = Pointer(current=None, load_failures=1, failing=None)
    assert never_loaded.metrics()["latestLoadTime"] == -1, "a full cache never loaded"

    metrics.loaded(0.0)
    assert metrics.snapshot()["latestLoadTime"] == 0.0
    assert aggregate([metrics.snapshot(), CacheMetrics().snapshot()])["latestLoadTime"] == 0.0


class ManyLoad:
    """A ``load_many`` that answers every key as ``FlakyLoad`` would, failing its first ``failures`` requests."""

    def __init__(self, failures: int = 0, empty: frozenset[Key] = frozenset()) -> None:
        self.failures = failures
        self.empty = empty
        self.requests: list[list[Key]] = []

    def __call__(self, keys: Sequence[Key]) -> list[Sequence[Sequence[Any]]]:
        self.requests.append(list(keys))
        if self.failures:
            self.failures -= 1
            raise ConnectionError("database went away")
        return [[] if key in self.empty else [[key[0], f"row of {key[0]}"]] for key in keys]


def _prefetching(
    many: ManyLoad, load: FlakyLoad | None = None, **cache_options: Any
) -> tuple[CachingLookup, FlakyLoad, CacheMetrics]:
    clock, load, metrics = FakeClock(), load or FlakyLoad(), CacheMetrics()
    cache = DefaultLookupCache(clock=clock, **{"max_rows": 100, **cache_options})
    lookup = CachingLookup(load, cache, metrics, max_retries=1, sleep=clock.sleep, clock=clock, load_many=many)
    lookup.open()
    return lookup, load, metrics


def test_a_batchs_missing_keys_are_fetched_together_and_counted_as_key_by_key_lookups() -> None:
    many = ManyLoad()
    lookup, load, metrics = _prefetching(many)
    lookup.lookup((9,))  # cached before the batch: not fetched again
    keys = [(1,), (2,), (1,), (9,), (3,), (2,)]

    lookup.prefetch(keys)
    rows = [lookup.lookup(key) for key in keys]

    assert many.requests == [[(1,), (2,), (3,)]]  # distinct, in order, without the cached key
    assert load.keys == [(9,)]  # no key of the batch was loaded alone
    assert rows == [((key[0], f"row of {key[0]}"),) for key in keys]
    counts = metrics.snapshot()
    assert (counts["missCount"], counts["hitCount"], counts["loadCount"]) == (4, 3, 4)  # (9,) first, then 1, 2, 3


def test_a_prefetched_result_serves_one_miss_only() -> None:
    many = ManyLoad(empty=frozenset({(5,)}))
    lookup, load, metrics = _prefetching(many, FlakyLoad(rows_of=lambda key: []), cache_missing_key=False)

    lookup.prefetch([(5,), (5,)])
    assert lookup.lookup((5,)) == () and lookup.lookup((5,)) == ()

    assert load.keys == [(5,)]  # the second miss of an uncached empty result asks again, as key by key would
    assert metrics.snapshot()["missCount"] == metrics.snapshot()["loadCount"] == 2


def test_a_failed_prefetch_falls_back_to_loading_each_key(caplog: pytest.LogCaptureFixture) -> None:
    many = ManyLoad(failures=2)  # the request and its one retry
    lookup, load, metrics = _prefetching(many)

    with caplog.at_level(logging.WARNING, logger="spark_tables.jobs.lookup.caching_lookup"):
        lookup.prefetch([(1,), (2,)])
    [record] = [r for r in caplog.records if r.name == "spark_tables.jobs.lookup.caching_lookup"]
    assert record.getMessage().startswith("the lookup of 2 keys together failed after its retries (")
    assert record.getMessage().endswith("): each of them loads alone")
    lookup.lookup((1,))
    lookup.lookup((2,))

    assert len(many.requests) == 2 and load.keys == [(1,), (2,)]
    assert metrics.snapshot()["numLoadFailure"] == 0 and metrics.snapshot()["loadCount"] == 2


def test_without_a_cache_nothing_is_prefetched() -> None:
    many, load, metrics = ManyLoad(), FlakyLoad(), CacheMetrics()
    lookup = CachingLookup(load, None, metrics, max_retries=0, load_many=many)

    lookup.prefetch([(1,), (1,)])
    lookup.lookup((1,))
    lookup.lookup((1,))

    assert many.requests == [] and load.keys == [(1,), (1,)]  # NONE: a query per lookup


def test_contains_counts_nothing_and_keeps_recency() -> None:
    clock, metrics = FakeClock(), CacheMetrics()
    cache = DefaultLookupCache(max_rows=2, clock=clock)
    cache.open(metrics)
    cache.put((1,), [])
    cache.put((2,), [])

    assert cache.contains((1,)) and not cache.contains((3,))
    cache.put((3,), [])  # (1,) is still the least recently used: contains did not touch it

    assert not cache.contains((1,)) and cache.contains((2,))
    assert metrics.snapshot()["hitCount"] == metrics.snapshot()["missCount"] == 0
