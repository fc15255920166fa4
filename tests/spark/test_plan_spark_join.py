"""The inner join of a compiled plan on Spark's stream-stream join: the same rows as the transform-with-state join,
step by step, with a TTL per side, TTL edits on restart, and Spark's state keeping only what lives.

Time is a ``FixedClock`` per available-now run, as for the other operators: the processing-time columns take its
instant, so what meets what is the test's decision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession

from spark_tables.core.errors import SpecError
from spark_tables.jobs.plan.join import join
from spark_tables.jobs.plan.spark_join import spark_join
from spark_tables.jobs.streaming.clock import BatchClock, FixedClock
from spark_tables.jobs.streaming.session_confs import NO_DATA_BATCHES
from tests.spark.plan_streams import JsonSource, changes, materialize, run, stream_session

pytestmark = pytest.mark.spark

SECOND = 1000
#: Far behind the batches' real time: the transform-with-state join's cleanup timers fire at every batch.
T0 = 1_600_000_000_000


@pytest.fixture(autouse=True)
def session_confs(spark: SparkSession) -> Iterator[None]:
    with stream_session(spark):
        yield


class Orders:
    """Orders and their shipments, two JSON streams, joined on the order's id by either operator."""

    def __init__(self, spark: SparkSession, tmp_path: Path) -> None:
        self.spark = spark
        self.orders = JsonSource(tmp_path / "orders", "order_id bigint, placed string")
        self.shipments = JsonSource(tmp_path / "shipments", "shipped_order bigint, carrier string")

    def joined(
        self, operator: Callable[..., DataFrame], left_ttl_ms: int, right_ttl_ms: int, at_ms: int, kind: str = "inner"
    ) -> DataFrame:
        return operator(
            self.orders.stream(self.spark),
            self.shipments.stream(self.spark),
            kind=kind,
            left_key=["order_id"],
            right_key=["shipped_order"],
            left_ttl_ms=left_ttl_ms,
            right_ttl_ms=right_ttl_ms,
            clock=FixedClock(T0 + at_ms),
        )

    def step(
        self, at_s: int, orders: list[dict[str, Any]], shipments: list[dict[str, Any]], ttls: tuple[int, int],
        checkpoints: Path,
    ) -> list[Any]:  # fmt: skip
        """One step on both operators, each from its own checkpoint: their changes, which must be the same."""
        if orders:
            self.orders.add(*orders)
        if shipments:
            self.shipments.add(*shipments)
        results = [
            changes(run(self.joined(operator, *ttls, at_s * SECOND), checkpoints / operator.__name__))
            for operator in (join, spark_join)
        ]
        assert results[0] == results[1], f"at {at_s} s the operators differ: {results}"
        return sorted(results[1].elements())


def join_state(spark: SparkSession, checkpoint: Path, side: str) -> list[Row]:
    """The rows a stream-stream join keeps of one side, read with Spark's state data source."""
    return spark.read.format("statestore").option("path", str(checkpoint)).option("joinSide", side).load().collect()


def test_a_ttl_per_side_gives_the_transform_with_state_join_s_rows_and_spark_drops_what_expired(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Orders live 4 s, shipments 30 s (the issue's figures): a shipment 7 s after its order misses it, an order
    7 s after its shipment meets it."""
    streams, checkpoints, ttls = Orders(spark, tmp_path), tmp_path / "checkpoints", (4 * SECOND, 30 * SECOND)
    assert streams.step(0, [{"order_id": 1, "placed": "o1"}], [{"shipped_order": 9, "carrier": "x"}], ttls,
                        checkpoints) == []  # fmt: skip
    assert streams.step(7, [], [{"shipped_order": 1, "carrier": "late"}], ttls, checkpoints) == []
    assert streams.step(8, [{"order_id": 2, "placed": "o2"}], [{"shipped_order": 2, "carrier": "a"}], ttls,
                        checkpoints) == [("+I", (2, "o2", 2, "a"))]  # fmt: skip
    assert streams.step(15, [{"order_id": 1, "placed": "o1 again"}], [], ttls, checkpoints) == [
        ("+I", (1, "o1 again", 1, "late"))  # the shipment came 8 s before: it lives 30 s
    ]
    # 32 s after shipment "a" (written at 8 s, TTL 30 s), order 2's new row finds nothing
    assert streams.step(40, [{"order_id": 2, "placed": "o2 again"}], [], ttls, checkpoints) == []

    # Spark drops a side's rows once the watermark (the last batch's time) passes them by that side's TTL
    state = checkpoints / "spark_join"
    assert sorted(row.value.placed for row in join_state(spark, state, "left")) == ["o1 again", "o2 again"]
    assert sorted(row.value.carrier for row in join_state(spark, state, "right")) == ["a", "late", "x"]
    streams.step(80, [{"order_id": 3, "placed": "o3"}], [], ttls, checkpoints)
    assert sorted(row.value.placed for row in join_state(spark, state, "left")) == ["o2 again", "o3"]
    assert join_state(spark, state, "right") == []


def test_ttls_edited_between_runs_resume_from_the_checkpoint_and_apply_to_the_rows_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    """No TTL, then a TTL on each side, then a longer one, then none again: Spark resumes every time, and the TTL
    of each run decides what meets."""
    streams, checkpoints = Orders(spark, tmp_path), tmp_path / "checkpoints"
    streams.step(0, [{"order_id": 1, "placed": "o1"}], [], (0, 0), checkpoints)
    # orders now live 4 s: the shipment 7 s after order 1 misses it
    assert streams.step(7, [], [{"shipped_order": 1, "carrier": "a"}], (4 * SECOND, 30 * SECOND), checkpoints) == []
    streams.step(8, [{"order_id": 2, "placed": "o2"}], [], (60 * SECOND, 30 * SECOND), checkpoints)
    # with 60 s, order 2 is met by its shipment 42 s later
    assert streams.step(50, [], [{"shipped_order": 2, "carrier": "b"}], (60 * SECOND, 30 * SECOND), checkpoints) == [
        ("+I", (2, "o2", 2, "b"))
    ]
    # with no TTL again, shipment "b" (written at 50 s, which 30 s would have expired) meets order 2's new row
    assert streams.step(200, [{"order_id": 2, "placed": "o2 again"}], [], (0, 0), checkpoints) == [
        ("+I", (2, "o2 again", 2, "b"))
    ]


def test_a_left_join_sends_an_order_alone_once_it_expired_and_ends_with_the_transform_with_state_join_s_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Orders live 4 s, shipments 30 s. The transform-with-state join sends an order alone at once and retracts it
    when its shipment comes; Spark's sends it once, alone or met, in the first run after it expired, its query
    running no-data micro-batches. What each leaves is the same once every order has expired."""
    streams, checkpoints, ttls = Orders(spark, tmp_path), tmp_path / "checkpoints", (4 * SECOND, 30 * SECOND)
    tables: dict[str, Counter[tuple[Any, ...]]] = {"join": Counter(), "spark_join": Counter()}
    sent: list[list[Any]] = []

    def step(at_s: int, orders: list[dict[str, Any]], shipments: list[dict[str, Any]]) -> None:
        if orders:
            streams.orders.add(*orders)
        if shipments:
            streams.shipments.add(*shipments)
        for operator in (join, spark_join):
            frame = streams.joined(operator, *ttls, at_s * SECOND, kind="left")
            rows = run(frame, checkpoints / operator.__name__, confs=NO_DATA_BATCHES if operator is spark_join else {})
            tables[operator.__name__] = materialize(rows, tables[operator.__name__])
            if operator is spark_join:
                sent.append(sorted(changes(rows).elements()))

    step(0, [{"order_id": 1, "placed": "o1"}, {"order_id": 5, "placed": "o5"}], [{"shipped_order": 9, "carrier": "x"}])
    step(2, [], [{"shipped_order": 5, "carrier": "y"}])
    # order 1 expired at 4 s: its shipment misses it, and Spark sends it alone
    step(7, [{"order_id": 2, "placed": "o2"}], [{"shipped_order": 1, "carrier": "late"}])
    step(20, [{"order_id": 3, "placed": "o3"}], [{"shipped_order": 3, "carrier": "z"}])
    step(40, [{"order_id": 4, "placed": "o4"}], [])
    assert sent == [
        [],
        [("+I", (5, "o5", 5, "y"))],
        [("+I", (1, "o1", None, None))],
        [("+I", (2, "o2", None, None)), ("+I", (3, "o3", 3, "z"))],
        [],
    ]
    assert tables["spark_join"] == tables["join"] - Counter({(4, "o4", None, None): 1})  # order 4 lives on
    with pytest.raises(SpecError) as raised:
        streams.joined(spark_join, 0, 30 * SECOND, 0, kind="left")
    assert str(raised.value) == (
        "a left join: implementation spark-stream-join sends a left row that met no right row when its left TTL "
        "expires, and a left TTL of 0 ms never does: give left_ttl_ms"
    )


def test_spark_join_takes_only_inserted_rows_of_distinct_names_and_a_clock_with_a_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    streams = Orders(spark, tmp_path)
    with pytest.raises(SpecError, match="join inputs both have order_id, placed: rename the columns of one side first"):
        spark_join(streams.orders.stream(spark), streams.orders.stream(spark), left_key=["order_id"],
                   right_key=["order_id"], left_ttl_ms=0, right_ttl_ms=0, clock=BatchClock())  # fmt: skip
    with pytest.raises(SpecError, match=r"join left_ttl_ms=-1 is invalid"):
        streams.joined(spark_join, -1, 0, 0)

    class Lagging:
        def now_ms(self, timer_values: Any) -> int:
            return 0

    with pytest.raises(SpecError, match="has no time column: Spark's own operators take BatchClock"):
        spark_join(streams.orders.stream(spark), streams.shipments.stream(spark), left_key=["order_id"],
                   right_key=["shipped_order"], left_ttl_ms=0, right_ttl_ms=0, clock=Lagging())  # fmt: skip
