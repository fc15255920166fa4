"""A probe batch joined by its distinct keys (``PartitionLookup.join``) against key-by-key lookups of its rows.

Pure Arrow, no Spark. Most tests run the same batches through twin lookups: one joins each batch by distinct key,
the other as the join did before, one ``lookup`` a probe row in order (``key_by_key``); the output rows, the
counters and the loads the source saw must be the same. No real time passes: caches and loads read a fake clock.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from spark_tables.core.lookup.table import SourceTable
from spark_tables.jobs.lookup.cache import DefaultLookupCache, Key, Rows
from spark_tables.jobs.lookup.caching_lookup import CachingLookup, LookupFailed
from spark_tables.jobs.lookup.metrics import COUNTER_NAMES, CacheMetrics
from spark_tables.jobs.lookup.partition import PartitionLookup

VALUE_NAMES = ("name", "amount")
VALUE_TYPES = (pa.string(), pa.decimal128(12, 2))
#: Key 7 has two rows; 3 has one row of nulls; 41 and 99 have none.
CUSTOMERS: dict[Key, list[tuple[Any, ...]]] = {
    **{(k,): [(f"customer-{k}", Decimal(k) / 4)] for k in range(1, 11)},
    (7,): [("customer-7", Decimal("1.75")), ("customer-7-bis", Decimal("0.50"))],
    (3,): [(None, None)],
}
#: Repeated keys, keys with several rows and with none, null keys; the second batch finds the cache warm.
BATCHES = ([1, 2, 1, 7, None, 41, 3, 7, 2, 99, 41, 1], [7, 41, 5, None, 1, 1, 99, 6])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Dimension:
    """A lookup table: the rows of each key. It records every key it loads (alone, together or async), fails the
    loads of ``failing`` keys, and takes ``seconds_a_load`` of the clock for each load."""

    def __init__(
        self,
        rows: dict[Key, list[tuple[Any, ...]]],
        clock: Clock,
        *,
        failing: frozenset[Key] = frozenset(),
        seconds_a_load: float = 0.0,
        inserted: dict[Key, list[tuple[Any, ...]]] | None = None,
    ) -> None:
        self.rows = dict(rows)
        self.clock = clock
        self.failing = failing
        self.seconds_a_load = seconds_a_load
        #: Rows a key gets once it has been loaded a first time (a row inserted while the batch runs).
        self.inserted = dict(inserted or {})
        self.loads: list[Key] = []

    def load(self, key: Key) -> list[tuple[Any, ...]]:
        self.loads.append(key)
        self.clock.now += self.seconds_a_load
        if key in self.failing:
            raise ConnectionError(f"no answer for {key}")
        rows = self.rows.get(key, [])
        if key in self.inserted:
            self.rows[key] = self.inserted.pop(key)
        return list(rows)

    def load_many(self, keys: Sequence[Key]) -> list[list[tuple[Any, ...]]]:
        return [self.load(key) for key in keys]

    async def load_async(self, key: Key) -> list[tuple[Any, ...]]:
        return self.load(key)


class SpyCache(DefaultLookupCache):
    """A ``DefaultLookupCache`` that records the keys ``get_if_present`` is asked for."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.asked: list[Key] = []

    def get_if_present(self, key: Key) -> Rows | None:
        self.asked.append(key)
        return super().get_if_present(key)


def make_lookup(
    dimension: Dimension, cache: str, load: str, **cache_options: Any
) -> tuple[CachingLookup, SpyCache | None]:
    """A lookup of ``dimension`` and its cache: ``cache`` NONE (none) or PARTIAL (a ``SpyCache``, 100 keys unless
    told), loading each key alone (``load`` "one"), a batch's missing keys together ("many") or at once ("async")."""
    spy = SpyCache(clock=dimension.clock, **{"max_rows": 100, **cache_options}) if cache == "PARTIAL" else None
    lookup = CachingLookup(
        dimension.load,
        spy,
        CacheMetrics(),
        max_retries=0,
        sleep=dimension.clock.sleep,
        clock=dimension.clock,
        load_many=dimension.load_many if load == "many" else None,
        load_async=dimension.load_async if load == "async" else None,
    )
    lookup.open()
    return lookup, spy


def partition(on: Sequence[str], value_names: Sequence[str], value_types: Sequence[pa.DataType], inner: bool):
    source = SourceTable(kind="postgres", connection={}, table="customers", key=tuple(on))
    return PartitionLookup(
        "test", "customers", source, {}, tuple(on), tuple(value_names), tuple(value_types), inner, "/nowhere"
    )


def key_by_key(
    batch: pa.RecordBatch,
    lookup: CachingLookup,
    on: Sequence[str],
    value_names: Sequence[str],
    value_types: Sequence[pa.DataType],
    inner: bool,
) -> pa.RecordBatch:
    """The join as it was before batches went by distinct key: one lookup a probe row with a key, in order."""
    keys = list(zip(*(batch.column(name).to_pylist() for name in on), strict=True))
    lookup.prefetch([key for key in keys if None not in key])
    indexes: list[int] = []
    joined: list[tuple[Any, ...]] = []
    unmatched = () if inner else ((None,) * len(value_types),)
    for index, key in enumerate(keys):
        rows = (None not in key and lookup.lookup(key)) or unmatched
        indexes.extend([index] * len(rows))
        joined.extend(rows)
    lookup.clear_prefetched()
    probe = batch.take(pa.array(indexes, type=pa.int64()))
    columns = zip(*joined, strict=True) if joined else ([] for _ in value_types)
    values = [pa.array(list(column), type=kind) for column, kind in zip(columns, value_types, strict=True)]
    return pa.RecordBatch.from_arrays([*probe.columns, *values], names=[*batch.schema.names, *value_names])


def probe_batch(keys: Sequence[int | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(range(len(keys)), type=pa.int64()), pa.array(keys, type=pa.int32())], names=["row", "id"]
    )


def counters(lookup: CachingLookup) -> dict[str, Any]:
    snapshot = lookup.metrics.snapshot()
    return {name: snapshot[name] for name in COUNTER_NAMES}


def join_both(
    new_dimension: Callable[[], Dimension],
    batches: Sequence[pa.RecordBatch],
    cache: str,
    load: str,
    *,
    on: Sequence[str] = ("id",),
    value_names: Sequence[str] = VALUE_NAMES,
    value_types: Sequence[pa.DataType] = VALUE_TYPES,
    inner: bool = False,
    **cache_options: Any,
) -> tuple[list[pa.RecordBatch], CachingLookup, Dimension]:
    """Join ``batches`` by distinct key and key by key on twin lookups; check that both give the same rows, counts
    and loads, and return the joined batches, the lookup and the source of the distinct-key side."""
    dimension, reference_dimension = new_dimension(), new_dimension()
    lookup, _ = make_lookup(dimension, cache, load, **cache_options)
    reference, _ = make_lookup(reference_dimension, cache, load, **cache_options)
    joiner = partition(on, value_names, value_types, inner)
    joined = []
    for batch in batches:
        joined.append(joiner.join(batch, lookup))
        expected = key_by_key(batch, reference, on, value_names, value_types, inner)
        assert joined[-1].schema == expected.schema
        assert joined[-1].to_pylist() == expected.to_pylist()
        assert counters(lookup) == counters(reference)
    assert Counter(dimension.loads) == Counter(reference_dimension.loads)
    return joined, lookup, dimension


def customers() -> Dimension:
    return Dimension(CUSTOMERS, Clock())


@pytest.mark.parametrize("inner", [False, True], ids=["left", "inner"])
@pytest.mark.parametrize("cache_missing_key", [True, False])
@pytest.mark.parametrize("load", ["one", "many", "async"])
def test_partial_by_distinct_key_returns_and_counts_as_key_by_key(
    load: str, cache_missing_key: bool, inner: bool
) -> None:
    batches = [probe_batch(keys) for keys in BATCHES]
    _, lookup, dimension = join_both(
        customers, batches, "PARTIAL", load, inner=inner, cache_missing_key=cache_missing_key
    )

    looked_up = sum(key is not None for keys in BATCHES for key in keys)
    counts = counters(lookup)
    assert counts["hitCount"] + counts["missCount"] == looked_up
    assert counts["loadCount"] == counts["missCount"] == len(dimension.loads)
    # 41 occurs three times and 99 twice: with cache-missing-key off, each occurrence is a miss and a load.
    assert dimension.loads.count((41,)) == (1 if cache_missing_key else 3)
    assert dimension.loads.count((99,)) == (1 if cache_missing_key else 2)
    assert dimension.loads.count((1,)) == 1


@pytest.mark.parametrize("inner", [False, True], ids=["left", "inner"])
@pytest.mark.parametrize("load", ["one", "async"])
def test_none_loads_once_per_probe_row_with_a_key(load: str, inner: bool) -> None:
    batches = [probe_batch(keys) for keys in BATCHES]
    _, lookup, dimension = join_both(customers, batches, "NONE", load, inner=inner)

    looked_up = [(key,) for keys in BATCHES for key in keys if key is not None]
    assert dimension.loads == looked_up  # a query per probe row, in the rows' order
    assert counters(lookup) == {"hitCount": 0, "missCount": 0, "loadCount": len(looked_up), "numLoadFailure": 0}


@pytest.mark.parametrize("load", ["one", "async"])
def test_without_a_cache_each_occurrence_of_a_distinct_key_loads(load: str) -> None:
    dimension = customers()
    lookup, _ = make_lookup(dimension, "NONE", load)

    answers = lookup.lookup_distinct([(1,), (7,)], [3, 2])

    assert answers == [((tuple(CUSTOMERS[(1,)]), 1),) * 3, ((tuple(CUSTOMERS[(7,)]), 1),) * 2]
    assert dimension.loads == [(1,), (1,), (1,), (7,), (7,)]
    assert counters(lookup) == {"hitCount": 0, "missCount": 0, "loadCount": 5, "numLoadFailure": 0}


def test_the_output_keeps_the_probe_rows_order_and_each_row_of_a_key() -> None:
    batch = probe_batch([7, None, 41, 2, 7])
    [left], _, _ = join_both(customers, [batch], "PARTIAL", "many")
    [inner], _, _ = join_both(customers, [batch], "PARTIAL", "many", inner=True)

    customer_7 = [("customer-7", Decimal("1.75")), ("customer-7-bis", Decimal("0.50"))]
    assert [(r["row"], r["id"], r["name"], r["amount"]) for r in left.to_pylist()] == [
        *((0, 7, *values) for values in customer_7),
        (1, None, None, None),
        (2, 41, None, None),
        (3, 2, "customer-2", Decimal("0.50")),
        *((4, 7, *values) for values in customer_7),
    ]
    assert [(r["row"], r["name"]) for r in inner.to_pylist()] == [
        (0, "customer-7"),
        (0, "customer-7-bis"),
        (3, "customer-2"),
        (4, "customer-7"),
        (4, "customer-7-bis"),
    ]


def test_a_batch_asks_the_cache_once_per_distinct_key() -> None:
    lookup, spy = make_lookup(customers(), "PARTIAL", "many")
    joiner = partition(("id",), VALUE_NAMES, VALUE_TYPES, inner=False)

    joiner.join(probe_batch([1, 2, 1, None, 7, 2, 1, 1]), lookup)
    assert spy.asked == [(1,), (2,), (7,)]
    assert counters(lookup) == {"hitCount": 4, "missCount": 3, "loadCount": 3, "numLoadFailure": 0}

    spy.asked.clear()
    joiner.join(probe_batch([2, 2, 1]), lookup)
    assert spy.asked == [(2,), (1,)]
    assert counters(lookup) == {"hitCount": 7, "missCount": 3, "loadCount": 3, "numLoadFailure": 0}


def test_a_key_the_cache_does_not_keep_is_a_miss_and_a_load_at_each_occurrence() -> None:
    dimension = customers()
    lookup, spy = make_lookup(dimension, "PARTIAL", "many", cache_missing_key=False)

    partition(("id",), VALUE_NAMES, VALUE_TYPES, inner=False).join(probe_batch([41, 1, 41, 41]), lookup)

    assert spy.asked == [(41,), (41,), (41,), (1,)]
    assert dimension.loads == [(41,), (1,), (41,), (41,)]  # the batch's request, then 41 alone twice
    assert counters(lookup) == {"hitCount": 0, "missCount": 4, "loadCount": 4, "numLoadFailure": 0}


def test_a_key_the_cache_does_not_keep_gets_the_rows_of_each_of_its_loads() -> None:
    """41 has no row when the batch's request runs, then one (inserted meanwhile): key by key, its second
    occurrence loads that row, which the cache keeps for the third."""
    inserted = {(41,): [("customer-41", Decimal("10.25"))]}
    [joined], lookup, dimension = join_both(
        lambda: Dimension(CUSTOMERS, Clock(), inserted=inserted),
        [probe_batch([41, 1, 41, 2, 41])],
        "PARTIAL",
        "many",
        cache_missing_key=False,
    )

    assert joined.column("name").to_pylist() == [None, "customer-1", "customer-41", "customer-2", "customer-41"]
    assert dimension.loads == [(41,), (1,), (2,), (41,)]
    assert counters(lookup) == {"hitCount": 1, "missCount": 4, "loadCount": 4, "numLoadFailure": 0}


def test_a_cache_that_keeps_nothing_counts_each_occurrence_as_key_by_key() -> None:
    batches = [probe_batch(keys) for keys in BATCHES]
    _, lookup, dimension = join_both(customers, batches, "PARTIAL", "many", max_rows=0)

    looked_up = sum(key is not None for keys in BATCHES for key in keys)
    assert counters(lookup) == {"hitCount": 0, "missCount": looked_up, "loadCount": looked_up, "numLoadFailure": 0}
    assert len(dimension.loads) == looked_up  # each first occurrence in its batch's request, the others alone


@pytest.mark.parametrize("inner", [False, True], ids=["left", "inner"])
@pytest.mark.parametrize("keys", [[], [None, None]], ids=["no rows", "null keys"])
def test_a_batch_without_keys_looks_nothing_up(keys: list[int | None], inner: bool) -> None:
    [joined], lookup, dimension = join_both(customers, [probe_batch(keys)], "PARTIAL", "many", inner=inner)

    assert joined.num_rows == (0 if inner else len(keys))
    assert dimension.loads == []
    assert counters(lookup) == dict.fromkeys(COUNTER_NAMES, 0)


@pytest.mark.parametrize(
    "cache_options, seconds_a_load",
    [({"max_rows": 1}, 0.0), ({"expire_after_write": 10}, 10.0)],
    ids=["evicted by max-rows", "expired"],
)
def test_a_key_lost_between_its_occurrences_is_still_looked_up_once_a_batch(
    cache_options: dict[str, Any], seconds_a_load: float
) -> None:
    """The documented difference: key by key, 1 leaves the cache while 2 loads, and its second occurrence misses
    and loads again; by distinct key, 1 is looked up once for the batch and its second occurrence is a hit."""
    batch = probe_batch([1, 2, 1])
    joiner = partition(("id",), VALUE_NAMES, VALUE_TYPES, inner=False)
    dimension, reference_dimension = (Dimension(CUSTOMERS, Clock(), seconds_a_load=seconds_a_load) for _ in "12")
    lookup, _ = make_lookup(dimension, "PARTIAL", "one", **cache_options)
    reference, _ = make_lookup(reference_dimension, "PARTIAL", "one", **cache_options)

    joined = joiner.join(batch, lookup)
    expected = key_by_key(batch, reference, ("id",), VALUE_NAMES, VALUE_TYPES, inner=False)

    assert joined.to_pylist() == expected.to_pylist()
    assert counters(lookup) == {"hitCount": 1, "missCount": 2, "loadCount": 2, "numLoadFailure": 0}
    assert counters(reference) == {"hitCount": 0, "missCount": 3, "loadCount": 3, "numLoadFailure": 0}
    assert (dimension.loads, reference_dimension.loads) == ([(1,), (2,)], [(1,), (2,), (1,)])


@pytest.mark.parametrize("load", ["many", "async"])
def test_the_keys_the_cache_holds_are_looked_up_before_the_batchs_loads_can_evict_them(load: str) -> None:
    """Key by key, 3's load evicts 1, held when the batch started, and 1 then misses and loads alone."""
    batch = probe_batch([3, 1])
    joiner = partition(("id",), VALUE_NAMES, VALUE_TYPES, inner=False)
    dimension, reference_dimension = customers(), customers()
    lookup, _ = make_lookup(dimension, "PARTIAL", load, max_rows=2)
    reference, _ = make_lookup(reference_dimension, "PARTIAL", load, max_rows=2)
    for warm in (lookup, reference):
        warm.lookup((1,))
        warm.lookup((2,))  # 1 is now the least recently used

    joined = joiner.join(batch, lookup)
    expected = key_by_key(batch, reference, ("id",), VALUE_NAMES, VALUE_TYPES, inner=False)

    assert joined.to_pylist() == expected.to_pylist()
    assert counters(lookup) == {"hitCount": 1, "missCount": 3, "loadCount": 3, "numLoadFailure": 0}
    assert counters(reference) == {"hitCount": 0, "missCount": 4, "loadCount": 4, "numLoadFailure": 0}
    assert (dimension.loads[2:], reference_dimension.loads[2:]) == ([(3,)], [(3,), (1,)])


@pytest.mark.parametrize("load", ["one", "many", "async"])
def test_a_load_failing_every_attempt_fails_the_batch_as_key_by_key(load: str) -> None:
    batch = probe_batch([1, 1, 5, 2])
    joiner = partition(("id",), VALUE_NAMES, VALUE_TYPES, inner=False)
    dimension, reference_dimension = (Dimension(CUSTOMERS, Clock(), failing=frozenset({(5,)})) for _ in "12")
    lookup, _ = make_lookup(dimension, "PARTIAL", load)
    reference, _ = make_lookup(reference_dimension, "PARTIAL", load)
    failed = r"lookup of key \(5,\) failed after 1 attempt\(s\): ConnectionError: no answer for \(5,\)"

    with pytest.raises(LookupFailed, match=failed):
        joiner.join(batch, lookup)
    with pytest.raises(LookupFailed, match=failed):
        key_by_key(batch, reference, ("id",), VALUE_NAMES, VALUE_TYPES, inner=False)

    failed_on_5 = {"hitCount": 1, "missCount": 2, "loadCount": 1, "numLoadFailure": 1}
    assert counters(lookup) == counters(reference) == failed_on_5
    assert dimension.loads == reference_dimension.loads


UTC = datetime.UTC
#: Value columns of every kind the join appends, with nulls.
TYPED_NAMES = ("instant", "local_time", "day", "amount", "label", "ratio", "flag", "count")
TYPED_TYPES = (
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("us"),
    pa.date32(),
    pa.decimal128(12, 2),
    pa.string(),
    pa.float64(),
    pa.bool_(),
    pa.int64(),
)
TYPED_ROW = (
    datetime.datetime(2026, 3, 29, 0, 30, tzinfo=UTC),
    datetime.datetime(2026, 3, 29, 2, 30),
    datetime.date(2026, 11, 23),
    Decimal("1234.56"),
    "é and ü",
    0.25,
    True,
    2**40,
)
NULL_ROW = (None,) * len(TYPED_NAMES)
#: (key columns, their Arrow types, the dimension's rows by key, probe keys: repeated, with a null in one column)
KEY_SHAPES = {
    "string and int": (
        ("region", "id"),
        (pa.string(), pa.int32()),
        {("eu", 1): [TYPED_ROW], ("us", 1): [NULL_ROW, TYPED_ROW], ("eu", 2): [NULL_ROW]},
        [("eu", 1), ("us", 1), ("eu", 1), (None, 1), ("eu", None), ("eu", 2), ("us", 2), ("us", 1)],
    ),
    "timestamp, decimal and date": (
        ("at", "price", "day"),
        (pa.timestamp("us", tz="UTC"), pa.decimal128(10, 2), pa.date32()),
        {
            (datetime.datetime(2026, 1, 1, tzinfo=UTC), Decimal("1.50"), datetime.date(2026, 1, 1)): [TYPED_ROW],
            (datetime.datetime(2026, 1, 2, tzinfo=UTC), Decimal("1.50"), datetime.date(2026, 1, 1)): [NULL_ROW],
        },
        [
            (datetime.datetime(2026, 1, 1, tzinfo=UTC), Decimal("1.50"), datetime.date(2026, 1, 1)),
            (datetime.datetime(2026, 1, 2, tzinfo=UTC), Decimal("1.50"), datetime.date(2026, 1, 1)),
            (datetime.datetime(2026, 1, 1, tzinfo=UTC), Decimal("1.50"), datetime.date(2026, 1, 2)),
            (datetime.datetime(2026, 1, 1, tzinfo=UTC), None, datetime.date(2026, 1, 1)),
            (datetime.datetime(2026, 1, 1, tzinfo=UTC), Decimal("1.50"), datetime.date(2026, 1, 1)),
        ],
    ),
}


@pytest.mark.parametrize("inner", [False, True], ids=["left", "inner"])
@pytest.mark.parametrize("shape", sorted(KEY_SHAPES))
def test_multi_column_keys_and_every_value_type(shape: str, inner: bool) -> None:
    on, key_types, rows, probe_keys = KEY_SHAPES[shape]
    columns = [
        pa.array(column, type=kind) for column, kind in zip(zip(*probe_keys, strict=True), key_types, strict=True)
    ]
    batch = pa.RecordBatch.from_arrays([pa.array(range(len(probe_keys))), *columns], names=["row", *on])

    joined, lookup, dimension = join_both(
        lambda: Dimension(rows, Clock()),
        [batch, batch],  # the second finds the cache warm
        "PARTIAL",
        "many",
        on=on,
        value_names=TYPED_NAMES,
        value_types=TYPED_TYPES,
        inner=inner,
    )

    keyed = [key for key in probe_keys if None not in key]
    assert Counter(dimension.loads) == Counter(set(keyed))
    assert counters(lookup)["hitCount"] == 2 * len(keyed) - len(set(keyed))
    found = [tuple(row[name] for name in TYPED_NAMES) for row in joined[1].to_pylist()]
    assert TYPED_ROW in found and NULL_ROW in found
    assert joined[0].to_pylist() == joined[1].to_pylist()
