"""The compiled plans' stateful operators with per-operator state TTL (FLIP-292), on file streams.

Time is a ``FixedClock`` per available-now run, each run resuming from the same checkpoint, so what expires is
decided by the test and not by how long Spark took. Without a TTL, Spark's own operators are the reference.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.aggregates import AggregateCall
from spark_tables.jobs.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from spark_tables.jobs.plan.deduplicate import LAST_ROW, deduplicate, spark_drop_duplicates
from spark_tables.jobs.plan.group_aggregate import ACCUMULATOR, group_aggregate
from spark_tables.jobs.plan.join import LEFT_SIDE, RIGHT_SIDE, ROWS, join
from spark_tables.jobs.plan.spark_join import spark_join
from spark_tables.jobs.streaming.clock import BatchClock, FixedClock
from tests.spark.plan_streams import (
    JsonSource,
    StateReader,
    changes,
    materialize,
    materialize_batches,
    run,
    run_batches,
    stream_session,
)

pytestmark = pytest.mark.spark

SECOND = 1000
COUNT = AggregateCall("count", None, "orders")


@pytest.fixture(autouse=True)
def session_confs(spark: SparkSession) -> Iterator[None]:
    with stream_session(spark):
        yield


def test_flip292_example_1_deduplicate_then_count_with_edited_ttls(spark: SparkSession, tmp_path: Path) -> None:
    """Dedup keep-first (TTL 20 s) feeding a count per shop (TTL 60 s), then the same with edited TTLs."""
    orders = JsonSource(tmp_path / "orders", "order_id bigint, shop string")

    def plan(dedup_ttl_ms: int, count_ttl_ms: int, at_ms: int) -> DataFrame:
        clock = FixedClock(at_ms)
        first = deduplicate(orders.stream(spark), ["order_id"], "first", dedup_ttl_ms, clock)
        return group_aggregate(first, ["shop"], [COUNT], count_ttl_ms, clock)

    checkpoint = tmp_path / "checkpoint"
    orders.add({"order_id": 1, "shop": "A"}, {"order_id": 2, "shop": "A"}, {"order_id": 3, "shop": "B"})
    first = run(plan(20 * SECOND, 60 * SECOND, 0), checkpoint)
    assert changes(first) == {("+I", ("A", 2)): 1, ("+I", ("B", 1)): 1}
    orders.add({"order_id": 1, "shop": "A"})  # a duplicate within 20 s: dropped
    assert run(plan(20 * SECOND, 60 * SECOND, 10 * SECOND), checkpoint) == []
    edited_dedup = tmp_path / "edited-dedup-ttl"
    shutil.copytree(checkpoint, edited_dedup)

    # 22 s after its first row, order 1 is new again to the dedup; shop A's count (written at 0 s) still lives.
    orders.add({"order_id": 1, "shop": "A"})
    edited_count = tmp_path / "edited-count-ttl"
    shutil.copytree(checkpoint, edited_count)
    again = run(plan(20 * SECOND, 60 * SECOND, 22 * SECOND), checkpoint)
    assert changes(again) == {("-U", ("A", 2)): 1, ("+U", ("A", 3)): 1}
    # The same restart with a dedup TTL of 30 s: order 1 is still a duplicate at 22 s.
    assert run(plan(30 * SECOND, 60 * SECOND, 22 * SECOND), edited_dedup) == []

    # At 70 s, shop B's count (last written at 0 s) has expired: B starts again from 1, retracting nothing.
    orders.add({"order_id": 4, "shop": "B"})
    late = run(plan(20 * SECOND, 60 * SECOND, 70 * SECOND), checkpoint)
    assert changes(late) == {("+I", ("B", 1)): 1}
    assert materialize(first + again + late) == {("A", 3): 1, ("B", 1): 2}
    # Restarting at 70 s with a count TTL of 90 s instead (both last files in one batch): B's count lives on.
    edited = run(plan(20 * SECOND, 90 * SECOND, 70 * SECOND), edited_count)
    assert changes(edited) == {("-U", ("A", 2)): 1, ("+U", ("A", 3)): 1, ("-U", ("B", 1)): 1, ("+U", ("B", 2)): 1}
    assert materialize(first + edited) == {("A", 3): 1, ("B", 2): 1}


def test_flip292_example_2_left_join_with_a_ttl_per_side(spark: SparkSession, tmp_path: Path) -> None:
    """Orders LEFT JOIN customers, with a short TTL on one side and a long one on the other, and swapped."""
    orders = JsonSource(tmp_path / "orders", "order_id bigint, customer bigint")
    customers = JsonSource(tmp_path / "customers", "customer_id bigint, name string")
    short_left, short_right = "orders 10 s, customers 100 s", "orders 100 s, customers 10 s"

    def plan(at_ms: int) -> DataFrame:
        def joined(left_ttl_ms: int, right_ttl_ms: int, label: str) -> DataFrame:
            result = join(
                orders.stream(spark),
                customers.stream(spark),
                kind="left",
                left_key=["customer"],
                right_key=["customer_id"],
                left_ttl_ms=left_ttl_ms,
                right_ttl_ms=right_ttl_ms,
                clock=FixedClock(at_ms),
            )
            return result.select(F.lit(label).alias("ttls"), "*")

        return joined(10 * SECOND, 100 * SECOND, short_left).union(joined(100 * SECOND, 10 * SECOND, short_right))

    checkpoint = tmp_path / "checkpoint"
    customers.add({"customer_id": 1, "name": "Ann"})
    steps = [run(plan(0), checkpoint)]
    assert steps[-1] == []
    orders.add({"order_id": 1, "customer": 1})
    steps.append(run(plan(5 * SECOND), checkpoint))
    assert changes(steps[-1]) == {("+I", (label, 1, 1, 1, "Ann")): 1 for label in (short_left, short_right)}

    # At 20 s, customer 1 gets a second row and order 2 comes.
    customers.add({"customer_id": 1, "name": "Ann B."})
    orders.add({"order_id": 2, "customer": 1})
    steps.append(run(plan(20 * SECOND), checkpoint))
    assert changes(steps[-1]) == {
        # Order 1 expired from the orders' state (written at 5 s) while "Ann" lives on in the customers' state.
        ("+I", (short_left, 2, 1, 1, "Ann")): 1,
        ("+I", (short_left, 2, 1, 1, "Ann B.")): 1,
        # "Ann" expired from the customers' state (written at 0 s) while order 1 lives on.
        ("+I", (short_right, 1, 1, 1, "Ann B.")): 1,
        ("+I", (short_right, 2, 1, 1, "Ann B.")): 1,
    }

    # At 30 s, "Ann B." (written at 20 s) expired from the 10 s customers' state: order 3 finds no customer.
    orders.add({"order_id": 3, "customer": 1})
    steps.append(run(plan(30 * SECOND), checkpoint))
    assert changes(steps[-1]) == {
        ("+I", (short_left, 3, 1, 1, "Ann")): 1,
        ("+I", (short_left, 3, 1, 1, "Ann B.")): 1,
        ("+I", (short_right, 3, 1, None, None)): 1,
    }
    assert materialize_batches(steps) == {
        (short_left, 1, 1, 1, "Ann"): 1,
        (short_left, 2, 1, 1, "Ann"): 1,
        (short_left, 2, 1, 1, "Ann B."): 1,
        (short_left, 3, 1, 1, "Ann"): 1,
        (short_left, 3, 1, 1, "Ann B."): 1,
        (short_right, 1, 1, 1, "Ann"): 1,
        (short_right, 1, 1, 1, "Ann B."): 1,
        (short_right, 2, 1, 1, "Ann B."): 1,
        (short_right, 3, 1, None, None): 1,
    }


def test_state_is_removed_after_its_ttl_and_ttls_can_be_edited(spark: SparkSession, tmp_path: Path) -> None:
    """Timers remove what expired, nothing goes with TTL 0, and TTLs go from a value to 0 and back on restarts."""
    events = JsonSource(tmp_path / "events", "id bigint, g string")
    groups = JsonSource(tmp_path / "groups", "group_id string, name string")
    checkpoint = tmp_path / "checkpoint"

    def step(ttl_ms: int, at_ms: int, event: dict[str, Any], group: dict[str, Any] | None = None) -> list[Row]:
        events.add(event)
        if group is not None:
            groups.add(group)
        clock = FixedClock(at_ms)  # far behind the batch time: timers fire at the next batch
        last = deduplicate(events.stream(spark), ["id"], "last", ttl_ms, clock)
        joined = join(
            last,
            groups.stream(spark),
            kind="left",
            left_key=["g"],
            right_key=["group_id"],
            left_ttl_ms=ttl_ms,
            right_ttl_ms=0,
            clock=clock,
        )
        return run(group_aggregate(joined, ["g"], [COUNT], ttl_ms, clock), checkpoint)

    state = StateReader(spark, checkpoint)
    assert changes(step(10 * SECOND, 1 * SECOND, {"id": 1, "g": "a"}, {"group_id": "a", "name": "A"})) == {
        ("+I", ("a", 1)): 1
    }
    step(10 * SECOND, 5 * SECOND, {"id": 2, "g": "b"}, {"group_id": "b", "name": "B"})
    # At 12 s, what was written at 1 s is gone; what was written at 5 s stays, and so do the groups (TTL 0).
    step(10 * SECOND, 12 * SECOND, {"id": 3, "g": "c"})
    assert state.keys(LAST_ROW) == {2, 3}
    assert state.keys(ROWS, LEFT_SIDE) == {"b", "c"}
    assert state.keys(ROWS, RIGHT_SIDE) == {"a", "b"}
    assert state.keys(ACCUMULATOR) == {"b", "c"}
    assert state.timers(LAST_ROW) == 2 and state.timers(ROWS) == 2 and state.timers(ACCUMULATOR) == 2

    # From 10 s to no TTL: the timers fire and remove nothing, and no new timer is set.
    step(0, 30 * SECOND, {"id": 4, "g": "a"})
    assert state.keys(LAST_ROW) == {2, 3, 4}
    assert state.keys(ROWS, LEFT_SIDE) == {"a", "b", "c"}
    assert state.keys(ACCUMULATOR) == {"a", "b", "c"}
    assert state.timers(LAST_ROW) == 0 and state.timers(ROWS) == 0 and state.timers(ACCUMULATOR) == 0

    # Back to 10 s: the TTL applies to the state written before. Event 2 (written at 5 s) has expired, so its move
    # to group a is a new row (+I, nothing retracted from b); group a's count (written at 30 s) still lives.
    moved = step(10 * SECOND, 31 * SECOND, {"id": 2, "g": "a"})
    assert changes(moved) == {("-U", ("a", 1)): 1, ("+U", ("a", 2)): 1}
    assert state.keys(LAST_ROW) == {2, 3, 4}
    assert state.timers(LAST_ROW) == 1 and state.timers(ROWS) == 1 and state.timers(ACCUMULATOR) == 1


def test_deduplicate_without_ttl_matches_spark(spark: SparkSession, tmp_path: Path) -> None:
    """Keep first as Spark's streaming dropDuplicates (which runs it without TTL); keep last as each key's last row,
    with -U/+U on the way."""
    events = JsonSource(tmp_path / "events", "id bigint, v string, seq bigint")
    events.add({"id": 1, "v": "a", "seq": 1}, {"id": 2, "v": "b", "seq": 2}, {"id": 1, "v": "c", "seq": 3})
    events.add({"id": 2, "v": "d", "seq": 4}, {"id": 3, "v": "e", "seq": 5}, {"id": 3, "v": "f", "seq": 6})
    events.add({"id": 1, "v": "g", "seq": 7}, {"id": 4, "v": "h", "seq": 8}, {"id": 3, "v": "f", "seq": 6})

    first = run(
        deduplicate(events.stream(spark, file_per_batch=True), ["id"], "first", 0, BatchClock()), tmp_path / "1"
    )
    reference = run(events.stream(spark, file_per_batch=True).dropDuplicates(["id"]), tmp_path / "2")
    assert (
        materialize(first) == materialize(reference) == {(1, "a", 1): 1, (2, "b", 2): 1, (3, "e", 5): 1, (4, "h", 8): 1}
    )
    # the plan's keep first without TTL on Spark's operator (implementation spark-drop-duplicates): the same inserts
    on_spark = run(spark_drop_duplicates(events.stream(spark, file_per_batch=True), ["id"]), tmp_path / "4")
    assert changes(on_spark) == changes(first)
    with pytest.raises(SpecError) as raised:
        spark_drop_duplicates(events.stream(spark), ["idx"])
    assert str(raised.value) == "deduplicate's key names 'idx', not columns of the input: use one of id, v, seq"

    last = deduplicate(events.stream(spark, file_per_batch=True), ["id"], "last", 0, FixedClock(0))
    batches = run_batches(last, tmp_path / "3")
    assert [changes(batch) for batch in batches] == [
        {("+I", (1, "c", 3)): 1, ("+I", (2, "b", 2)): 1},
        {("-U", (2, "b", 2)): 1, ("+U", (2, "d", 4)): 1, ("+I", (3, "f", 6)): 1},
        # Event 3 comes again unchanged: with no TTL, nothing is sent for it.
        {("-U", (1, "c", 3)): 1, ("+U", (1, "g", 7)): 1, ("+I", (4, "h", 8)): 1},
    ]
    assert materialize_batches(batches) == Counter(map(tuple, _last_rows(events.table(spark), "id").collect()))


def test_group_aggregate_without_ttl_matches_spark(spark: SparkSession, tmp_path: Path) -> None:
    """Every aggregate, nulls included, as Spark's streaming aggregation has it after each batch, in Spark's types."""
    sales = JsonSource(tmp_path / "sales", "shop string, units bigint, price decimal(10,2), weight double")
    pick = random.Random(292)
    for _ in range(3):
        sales.add(*(_sale(pick) for _ in range(25)))
    calls = _every_aggregate()

    def ours(insert_only: bool) -> DataFrame:
        result = group_aggregate(
            sales.stream(spark, file_per_batch=True), ["shop"], calls, 0, FixedClock(0), insert_only=insert_only
        )
        return result.select(F.lit(insert_only).alias("insert_only"), "*")

    batches = run_batches(ours(insert_only=False).union(ours(insert_only=True)), tmp_path / "ours")
    results = _by_first_column(materialize_batches(batches))
    spark_all = sales.table(spark).groupBy("shop").agg(*(F.expr(call.describe()) for call in calls))
    assert ours(insert_only=False).schema.fields[2:-1] == spark_all.schema.fields[1:]
    assert results[False] == results[True] == Counter(map(tuple, spark_all.collect()))
    # Spark's streaming aggregation has no DISTINCT: the others, as it has them after its last batch.
    plain = [index for index, call in enumerate(calls) if not call.distinct]
    spark_own = (
        sales.stream(spark, file_per_batch=True)
        .groupBy("shop")
        .agg(*(F.expr(calls[index].describe()) for index in plain))
    )
    final = {row.shop: tuple(row) for row in run(spark_own, tmp_path / "spark", "update")}
    plain_results = Counter(row[:1] + tuple(row[1 + index] for index in plain) for row in results[False].elements())
    assert plain_results == Counter(final.values())


def test_group_aggregate_follows_retractions(spark: SparkSession, tmp_path: Path) -> None:
    """Every aggregate over a keep-last dedup, whose rows move between groups: as a batch over each last row."""
    events = JsonSource(
        tmp_path / "events", "id bigint, shop string, units bigint, price decimal(10,2), weight double, seq bigint"
    )
    pick = random.Random(2920)
    for batch in range(3):
        events.add(*({"id": pick.randrange(12), **_sale(pick), "seq": batch * 100 + i} for i in range(20)))
    calls = _every_aggregate()

    last = deduplicate(events.stream(spark, file_per_batch=True), ["id"], "last", 0, FixedClock(0))
    batches = run_batches(group_aggregate(last, ["shop"], calls, 0, FixedClock(0)), tmp_path / "ours")
    reference = _last_rows(events.table(spark), "id").groupBy("shop").agg(*(F.expr(call.describe()) for call in calls))
    assert materialize_batches(batches) == Counter(map(tuple, reference.collect()))


def test_keep_last_updates_flow_through_the_aggregation(spark: SparkSession, tmp_path: Path) -> None:
    """A row that changes or moves to another group: -U/+U from the dedup, then the groups' -U/+U and -D.

    An unchanged row is sent on, and an unchanged result sent again, only with a TTL (here one that never ends).
    """
    orders = JsonSource(tmp_path / "orders", "order_id bigint, shop string, amount bigint")
    orders.add(
        {"order_id": 1, "shop": "A", "amount": 10},
        {"order_id": 2, "shop": "A", "amount": 20},
        {"order_id": 3, "shop": "B", "amount": 5},
    )
    orders.add({"order_id": 1, "shop": "A", "amount": 15}, {"order_id": 3, "shop": "A", "amount": 7})
    orders.add({"order_id": 3, "shop": "B", "amount": 7})
    orders.add({"order_id": 2, "shop": "A", "amount": 20})
    calls = [
        COUNT,
        AggregateCall("sum", "amount", "total"),
        AggregateCall("min", "amount", "smallest"),
        AggregateCall("max", "amount", "largest"),
    ]

    def plan(ttl_ms: int) -> DataFrame:
        stream = orders.stream(spark, file_per_batch=True)
        last = deduplicate(stream, ["order_id"], "last", ttl_ms, FixedClock(0))
        counts = group_aggregate(last, ["shop"], calls, ttl_ms, FixedClock(0))
        return counts.select(F.lit(ttl_ms).alias("ttl"), "*")

    hour = 3600 * SECOND
    batches = run_batches(plan(0).union(plan(hour)), tmp_path / "checkpoint")
    by_ttl: list[dict[int, Counter[Any]]] = [{0: Counter(), hour: Counter()} for _ in batches]
    for batch, split in zip(batches, by_ttl, strict=True):
        for (kind, row), count in changes(batch).items():
            split[row[0]][(kind, row[1:])] += count
    assert [split[0] for split in by_ttl] == [
        {("+I", ("A", 2, 30, 10, 20)): 1, ("+I", ("B", 1, 5, 5, 5)): 1},
        # Order 1 changes (-U 10, +U 15) and order 3 moves from B to A: B's last row is retracted.
        {("-U", ("A", 2, 30, 10, 20)): 1, ("+U", ("A", 3, 42, 7, 20)): 1, ("-D", ("B", 1, 5, 5, 5)): 1},
        # Order 3 moves back, taking A's minimum with it.
        {("-U", ("A", 3, 42, 7, 20)): 1, ("+U", ("A", 2, 35, 15, 20)): 1, ("+I", ("B", 1, 7, 7, 7)): 1},
        # Order 2 comes again unchanged: nothing changes.
        {},
    ]
    assert [split[hour] for split in by_ttl[:3]] == [split[0] for split in by_ttl[:3]]
    assert by_ttl[3][hour] == {("-U", ("A", 2, 35, 15, 20)): 1, ("+U", ("A", 2, 35, 15, 20)): 1}


def test_joins_without_ttl_match_spark(spark: SparkSession, tmp_path: Path) -> None:
    """Inner as Spark's stream-stream join, left as Spark's batch left join, with repeated rows and null keys; the
    inner join on Spark's operator (``spark_join``) too."""
    left = JsonSource(tmp_path / "left", "left_id bigint, k bigint, lv string")
    right = JsonSource(tmp_path / "right", "right_id bigint, rk bigint, rv string")
    pick = random.Random(2921)
    for batch in range(3):
        left.add(*({"left_id": batch * 10 + i, "k": _key(pick), "lv": pick.choice("xy")} for i in range(8)))
        right.add(*({"right_id": batch * 10 + i, "rk": _key(pick), "rv": pick.choice("xy")} for i in range(6)))
    left.add({"left_id": 99, "k": 1, "lv": "x"}, {"left_id": 99, "k": 1, "lv": "x"})  # the same row twice
    right.add({"right_id": 99, "rk": 1, "rv": "z"})

    def ours(kind: str) -> DataFrame:
        joined = join(
            left.stream(spark, file_per_batch=True),
            right.stream(spark, file_per_batch=True),
            kind=kind,
            left_key=["k"],
            right_key=["rk"],
            left_ttl_ms=0,
            right_ttl_ms=0,
            clock=FixedClock(0),
        )
        return joined.select(F.lit(kind).alias("kind"), "*")

    batches = run_batches(ours("inner").union(ours("left")), tmp_path / "ours")
    results = _by_first_column(materialize_batches(batches))
    left_stream = left.stream(spark, file_per_batch=True).drop(ROW_KIND)
    right_stream = right.stream(spark, file_per_batch=True).drop(ROW_KIND)
    spark_inner = run(left_stream.join(right_stream, F.col("k") == F.col("rk")), tmp_path / "spark")
    assert results["inner"] == Counter(map(tuple, spark_inner))
    on_spark = spark_join(
        left.stream(spark, file_per_batch=True),
        right.stream(spark, file_per_batch=True),
        left_key=["k"],
        right_key=["rk"],
        left_ttl_ms=0,
        right_ttl_ms=0,
        clock=FixedClock(1_600_000_000_000),  # one instant for every batch of the run
    )
    assert materialize(run(on_spark, tmp_path / "on_spark")) == results["inner"]
    spark_left = left.table(spark).join(right.table(spark), F.col("k") == F.col("rk"), "left")
    assert results["left"] == Counter(map(tuple, spark_left.collect()))


def test_joins_follow_retractions(spark: SparkSession, tmp_path: Path) -> None:
    """Inner and left joins of two changelogs that update and delete rows: as batch joins of what they leave."""
    left_schema, right_schema = "left_id bigint, k bigint, lv string", "right_id bigint, rk bigint, rv string"
    left = JsonSource(tmp_path / "left", f"{left_schema}, {ROW_KIND} tinyint", changelog=True)
    right = JsonSource(tmp_path / "right", f"{right_schema}, {ROW_KIND} tinyint", changelog=True)
    pick = random.Random(2922)
    left_rows = _changelog(left, 8, lambda id_: {"left_id": id_, "k": _key(pick), "lv": pick.choice("xy")}, pick)
    right_rows = _changelog(right, 6, lambda id_: {"right_id": id_, "rk": _key(pick), "rv": pick.choice("xy")}, pick)

    def ours(kind: str) -> DataFrame:
        joined = join(
            left.stream(spark, file_per_batch=True),
            right.stream(spark, file_per_batch=True),
            kind=kind,
            left_key=["k"],
            right_key=["rk"],
            left_ttl_ms=0,
            right_ttl_ms=0,
            clock=FixedClock(0),
        )
        return joined.select(F.lit(kind).alias("kind"), "*")

    batches = run_batches(ours("inner").union(ours("left")), tmp_path / "ours")
    results = _by_first_column(materialize_batches(batches))
    final_left = spark.createDataFrame(list(left_rows.elements()), left_schema)
    final_right = spark.createDataFrame(list(right_rows.elements()), right_schema)
    for kind in ("inner", "left"):
        expected = final_left.join(final_right, F.col("k") == F.col("rk"), kind)
        assert results[kind] == Counter(map(tuple, expected.collect())), kind


def test_bad_arguments_are_spec_errors(spark: SparkSession, tmp_path: Path) -> None:
    rows = JsonSource(tmp_path / "rows", "id bigint, name string, amount decimal(10,2)")
    stream = rows.stream(spark)
    with pytest.raises(SpecError, match="keep='middle'"):
        deduplicate(stream, ["id"], "middle", 0, FixedClock(0))
    with pytest.raises(SpecError, match="ttl_ms=-1"):
        deduplicate(stream, ["id"], "first", -1, FixedClock(0))
    with pytest.raises(SpecError, match="'ident', not columns"):
        deduplicate(stream, ["ident"], "first", 0, FixedClock(0))
    with pytest.raises(SpecError, match="no last column __row_kind"):
        deduplicate(stream.drop(ROW_KIND), ["id"], "first", 0, FixedClock(0))
    with pytest.raises(SpecError, match="not a clock"):
        deduplicate(stream, ["id"], "first", 0, 0)
    with pytest.raises(SpecError, match="needs a numeric column"):
        group_aggregate(stream, ["id"], [AggregateCall("sum", "name", "total")], 0, FixedClock(0))
    with pytest.raises(SpecError, match="repeat a name"):
        group_aggregate(stream, ["id"], [AggregateCall("count", None, "id")], 0, FixedClock(0))
    other = stream.select(F.col("id").cast("string").alias("other_id"), ROW_KIND)
    with pytest.raises(SpecError, match="differ in type"):
        join(
            stream,
            other,
            kind="inner",
            left_key=["id"],
            right_key=["other_id"],
            left_ttl_ms=0,
            right_ttl_ms=0,
            clock=FixedClock(0),
        )
    with pytest.raises(SpecError, match="both have amount, id, name"):
        join(
            stream,
            stream,
            kind="left",
            left_key=["id"],
            right_key=["id"],
            left_ttl_ms=0,
            right_ttl_ms=0,
            clock=FixedClock(0),
        )
    with pytest.raises(SpecError, match="kind='full'"):
        join(
            stream,
            other,
            kind="full",
            left_key=["id"],
            right_key=["other_id"],
            left_ttl_ms=0,
            right_ttl_ms=0,
            clock=FixedClock(0),
        )


def _every_aggregate() -> list[AggregateCall]:
    return [
        AggregateCall("count", None, "rows"),
        AggregateCall("count", "units", "with_units"),
        AggregateCall("count", "units", "unit_values", distinct=True),
        AggregateCall("sum", "units", "units"),
        AggregateCall("sum", "units", "distinct_units", distinct=True),
        AggregateCall("min", "units", "fewest"),
        AggregateCall("max", "units", "most"),
        AggregateCall("avg", "units", "mean_units"),
        AggregateCall("avg", "units", "mean_distinct_units", distinct=True),
        AggregateCall("sum", "price", "revenue"),
        AggregateCall("avg", "price", "mean_price"),
        AggregateCall("min", "price", "cheapest"),
        AggregateCall("max", "price", "dearest"),
        AggregateCall("sum", "weight", "weight"),
        AggregateCall("avg", "weight", "mean_weight"),
        AggregateCall("max", "weight", "heaviest"),
    ]


def _sale(pick: random.Random) -> dict[str, Any]:
    return {
        "shop": pick.choice("abcd"),
        "units": pick.choice([None, 1, 2, 3, 5, 8]),
        "price": pick.choice([None, "0.10", "1.25", "9.99", "12.50"]),
        "weight": pick.choice([None, 0.25, 1.5, 2.75]),
    }


def _changelog(
    source: JsonSource, ids: int, make_row: Callable[[int], dict[str, Any]], pick: random.Random
) -> Counter[tuple[Any, ...]]:
    """Three files of a changelog over rows of ``ids`` ids that come, change and go; the rows it leaves."""
    live: dict[int, dict[str, Any]] = {}
    for _ in range(3):
        changes: list[dict[str, Any]] = []
        for _ in range(8):
            id_ = pick.randrange(ids)
            if id_ not in live:
                live[id_] = make_row(id_)
                changes.append({**live[id_], ROW_KIND: INSERT})
            elif pick.random() < 0.7:
                changes.append({**live[id_], ROW_KIND: UPDATE_BEFORE})
                live[id_] = make_row(id_)
                changes.append({**live[id_], ROW_KIND: UPDATE_AFTER})
            else:
                changes.append({**live.pop(id_), ROW_KIND: DELETE})
        source.add(*changes)
    return Counter(tuple(row.values()) for row in live.values())


def _key(pick: random.Random) -> int | None:
    return pick.choice([None, 1, 2, 3, 4])


def _last_rows(table: DataFrame, key: str) -> DataFrame:
    """Each ``key``'s row with the largest ``seq``, as a keep-last dedup leaves it."""
    latest = Window.partitionBy(key).orderBy(F.col("seq").desc())
    return table.withColumn("__rank", F.row_number().over(latest)).where("__rank = 1").drop("__rank")


def _by_first_column(table: Counter[tuple[Any, ...]]) -> dict[Any, Counter[tuple[Any, ...]]]:
    """``table``'s rows by their first column, without it."""
    split: dict[Any, Counter[tuple[Any, ...]]] = {}
    for row, count in table.items():
        split.setdefault(row[0], Counter())[row[1:]] += count
    return split
