"""Plan statements run on the shared local session: COMPILE PLAN onto files, EXPLAIN PLAN, and EXECUTE PLAN of
FLIP-292's Example 1 into PostgreSQL, step by step with a fixed processing time, editing the plan's TTLs between
steps and resuming from the checkpoint."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.errors import JobError, SpecError
from spark_tables.core.names import flat_name
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.plan.result import PlanResult
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.plan.runner import run_plan_statement
from spark_tables.jobs.streaming.clock import FixedClock
from spark_tables.tasks.sql_reader import read_plan_statement
from tests.spark.postgres import PG, run_sql

pytestmark = pytest.mark.spark

PG_SCHEMA = "plan_runner_spark_tests"
COUNTS = PostgresUpsertSink(name="shop_counts", conn_id="pg", table=f"{PG_SCHEMA}.shop_counts", key=("shop",))
#: FLIP-292's Example 1, times scaled down: orders deduplicated by id (a duplicate within the TTL is dropped),
#: then counted per shop.
EXAMPLE_1 = """
    INSERT INTO shop_counts
    SELECT shop, COUNT(*) AS orders, SUM(amount) AS total
    FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn FROM orders)
    WHERE rn = 1
    GROUP BY shop
"""
#: The processing time of the first step: any instant works, the steps count from it.
T0 = 1_800_000_000_000


@pytest.fixture
def orders(spark: SparkSession, db: str, tmp_path: Path) -> Iterator[Path]:
    """A JSON-file stream table ``orders`` (its folder is returned) and an empty PostgreSQL ``shop_counts``."""
    folder = tmp_path / "orders"
    folder.mkdir()
    spark.sql(f"CREATE TABLE {db}.orders (order_id INT, shop STRING, amount INT) USING json LOCATION '{folder}'")
    spark.sql(f"USE {db}")
    run_sql(
        f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE",
        f"CREATE SCHEMA {PG_SCHEMA}",
        f"CREATE TABLE {COUNTS.table} (shop text PRIMARY KEY, orders bigint, total bigint)",
    )
    yield folder
    spark.sql("USE default")
    run_sql(f"DROP SCHEMA IF EXISTS {PG_SCHEMA} CASCADE")


def _options(tmp_path: Path, ttl: str = "0 ms", **configuration: str) -> PlanOptions:
    return PlanOptions(
        configuration={"table.exec.state.ttl": ttl, **configuration},
        postgres_sinks=(COUNTS,),
        connections={COUNTS.name: dict(PG)},
        checkpoints=str(tmp_path / "checkpoints"),
    )


def _run(spark: SparkSession, statement: str, options: PlanOptions, at_ms: int = T0) -> PlanResult:
    return run_plan_statement(spark, read_plan_statement(statement), options, Cancellation(), FixedClock(at_ms))


def _add_orders(folder: Path, name: str, *orders: tuple[int, str, int]) -> None:
    lines = [json.dumps({"order_id": order_id, "shop": shop, "amount": amount}) for order_id, shop, amount in orders]
    (folder / f"{name}.json").write_text("\n".join(lines) + "\n")


def _counts() -> dict[str, tuple[int, int]]:
    return {shop: (n, total) for shop, n, total in run_sql(f"SELECT shop, orders, total FROM {COUNTS.table}")}


def _edit_state(plan_file: Path, node_type: str, ttl: str) -> None:
    plan = json.loads(plan_file.read_text())
    for node in plan["nodes"]:
        if node["type"] == node_type:
            node["state"][0]["ttl"] = ttl
    plan_file.write_text(json.dumps(plan, indent=2))


def _edit_deduplication(plan_file: Path, **fields: object) -> None:
    plan = json.loads(plan_file.read_text())
    next(node for node in plan["nodes"] if node["type"] == "stream-exec-deduplicate").update(fields)
    plan_file.write_text(json.dumps(plan, indent=2))


def test_compile_refuses_an_existing_plan_unless_kept_or_replaced(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "plans" / "example_1.json"
    compile_ = f"COMPILE PLAN '{plan_file}' FOR {EXAMPLE_1}"
    assert _run(spark, compile_, _options(tmp_path)).compile == {"written": True, "replaced": False, "nodes": 6}
    _edit_state(plan_file, "stream-exec-deduplicate", "20 s")
    edited = plan_file.read_text()

    with pytest.raises(SpecError, match=r"exists: write COMPILE PLAN IF NOT EXISTS to keep it, or set table\.plan"):
        _run(spark, compile_, _options(tmp_path))
    kept = _run(spark, f"COMPILE PLAN IF NOT EXISTS 'file://{plan_file}' FOR {EXAMPLE_1}", _options(tmp_path))
    assert kept.compile == {"written": False, "kept_existing": True}
    assert plan_file.read_text() == edited
    replaced = _run(spark, compile_, _options(tmp_path, "1 h", **{"table.plan.force-recompile": "true"}))
    assert replaced.compile["replaced"] is True
    assert '"ttl": "3600000 ms"' in plan_file.read_text() and '"20000 ms"' not in plan_file.read_text()


def test_explain_checks_the_plan_against_the_catalog_and_shows_each_ttl(
    spark: SparkSession, orders: Path, tmp_path: Path, db: str
) -> None:
    plan_file = tmp_path / "example_1.json"
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {EXAMPLE_1}", _options(tmp_path, "1 min"))
    _edit_state(plan_file, "stream-exec-group-aggregate", "10 s")

    explained = _run(spark, f"EXPLAIN PLAN '{plan_file}'", _options(tmp_path)).explain

    states = {node["type"]: node.get("state") for node in explained["nodes"]}
    assert states["stream-exec-deduplicate"][0]["ttl_ms"] == 60_000
    assert states["stream-exec-group-aggregate"][0]["ttl_ms"] == 10_000
    assert [edge for edge in explained["edges"] if edge[1] == 6]
    assert explained["warnings"] == [
        "node 4 (stream-exec-group-aggregate) keeps its groupAggregateState for 10000 ms, less than node 2 "
        "(stream-exec-deduplicate) upstream keeps its deduplicateState (60000 ms): rows still live upstream may be "
        "gone here; give downstream operators a TTL at least as long"
    ]
    assert "[2] stream-exec-deduplicate_1 <- 1: Deduplicate(keep=[FirstRow], key=[order_id]" in explained["text"]
    assert "      implementation transform-with-state\n" in explained["text"]  # it has a TTL

    spark.sql(f"DROP TABLE {db}.orders")
    spark.sql(f"CREATE TABLE {db}.orders (order_id INT, shop STRING) USING json LOCATION '{orders}'")
    with pytest.raises(SpecError) as raised:
        _run(spark, f"EXPLAIN PLAN '{plan_file}'", _options(tmp_path))
    assert str(raised.value).startswith("node 3 (stream-exec-calc): [UNRESOLVED_COLUMN")
    assert "amount" in str(raised.value) and "\n" not in str(raised.value)
    assert not spark.streams.active


def test_a_plan_edited_to_send_updates_into_a_catalog_table_is_refused_before_any_query(
    spark: SparkSession, orders: Path, tmp_path: Path, db: str
) -> None:
    spark.sql(f"CREATE TABLE {db}.first_orders (order_id INT, shop STRING, amount INT) USING parquet")
    plan_file = tmp_path / "first_orders.json"
    first = """INSERT INTO first_orders SELECT order_id, shop, amount
               FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn FROM orders)
               WHERE rn = 1"""
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {first}", _options(tmp_path))
    _add_orders(orders, "a", (1, "north", 5))
    # keep last onto Spark's dropDuplicates (keep first without TTL), which cannot keep it; then on the implementation
    # that can, in front of a catalog table, which takes no updates
    for edit, message in (
        ({"keep": "last"}, "node 2 (stream-exec-deduplicate): implementation spark-drop-duplicates keeps a key's "
         "first row, not its last: set its implementation to transform-with-state"),
        ({"implementation": "transform-with-state"}, "the query updates its results (an aggregation, a keep-last "
         "deduplication or a left join on transform-with-state), but first_orders is a catalog table appended to, "
         "which takes inserted rows only: write into a PostgresUpsertSink, or declare the table kept by key (a "
         "TableUpsertSink in catalog_sinks)"),
    ):  # fmt: skip
        _edit_deduplication(plan_file, **edit)
        for statement in (f"EXPLAIN PLAN '{plan_file}'", f"EXECUTE PLAN '{plan_file}'"):
            with pytest.raises(SpecError) as raised:
                _run(spark, statement, _options(tmp_path))
            assert str(raised.value) == message
    assert not spark.streams.active
    assert not (tmp_path / "checkpoints").exists()
    assert spark.table(f"{db}.first_orders").count() == 0


def test_example_1_a_key_expires_from_the_deduplication_while_its_count_lives_on(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "example_1.json"
    options = _options(tmp_path)
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {EXAMPLE_1}", options)
    # compiled without TTL, the deduplication runs on Spark's dropDuplicates, which keeps every key for ever: a TTL
    # edited in asks for transform-with-state too
    _edit_state(plan_file, "stream-exec-deduplicate", "20 s")
    _edit_state(plan_file, "stream-exec-group-aggregate", "60 s")
    execute = f"EXECUTE PLAN '{plan_file}'"
    with pytest.raises(SpecError) as raised:
        _run(spark, execute, options, T0)
    assert str(raised.value).startswith(
        "node 2 (stream-exec-deduplicate): implementation spark-drop-duplicates keeps every key for ever, but its TTL "
        "is 20000 ms: set its implementation to transform-with-state"
    )
    _edit_deduplication(plan_file, implementation="transform-with-state")

    _add_orders(orders, "t00", (1, "a", 10), (2, "a", 5), (3, "b", 7))
    first = _run(spark, execute, options, T0).execute["queries"][0]
    assert _counts() == {"a": (2, 15), "b": (1, 7)}
    assert first["input_rows"] == 3 and first["write_calls"] == 1

    _add_orders(orders, "t10", (1, "a", 10))  # a duplicate 10 s later: dropped
    _run(spark, execute, options, T0 + 10_000)
    assert _counts() == {"a": (2, 15), "b": (1, 7)}

    # 22 s after order 1 was first seen, the deduplication has forgotten it (20 s), while shop a's count lives on
    # (60 s): order 1 is counted again, on top of a's count
    _add_orders(orders, "t22", (1, "a", 10))
    _run(spark, execute, options, T0 + 22_000)
    assert _counts() == {"a": (3, 25), "b": (1, 7)}

    # edit the deduplication's TTL to 50 s and resume from the checkpoint: the edit applies to the state kept, so
    # order 2 (first seen at 0 s) is still known at 45 s and dropped, where 20 s would have counted it again
    _edit_state(plan_file, "stream-exec-deduplicate", "50 s")
    _add_orders(orders, "t45", (2, "a", 5))
    _run(spark, execute, options, T0 + 45_000)
    assert _counts() == {"a": (3, 25), "b": (1, 7)}

    # at 200 s shop b's count (last written at 0 s) has expired too: its next order starts it again from 1
    _add_orders(orders, "t200", (9, "b", 4))
    _run(spark, execute, options, T0 + 200_000)
    assert _counts() == {"a": (3, 25), "b": (1, 4)}


def test_execute_plan_if_exists_does_nothing_without_a_plan(spark: SparkSession, tmp_path: Path) -> None:
    result = _run(spark, f"EXECUTE PLAN IF EXISTS '{tmp_path / 'none.json'}'", _options(tmp_path))
    assert result.execute == {"skipped": "the plan does not exist"}
    with pytest.raises(SpecError, match=r"none\.json does not exist: compile it first"):
        _run(spark, f"EXECUTE PLAN '{tmp_path / 'none.json'}'", _options(tmp_path))


def test_a_plan_on_s3_is_compiled_explained_and_executed(
    spark: SparkSession, orders: Path, tmp_path: Path, s3_bucket: str
) -> None:
    import fsspec

    uri = f"{s3_bucket}/nightly/example_1.json"
    options = _options(tmp_path, "20 s")
    _run(spark, f"COMPILE PLAN '{uri}' FOR {EXAMPLE_1}", options)
    s3 = fsspec.filesystem("s3", skip_instance_cache=True)
    plan = json.loads(s3.cat(uri))
    assert plan["format_version"] == 1 and len(plan["nodes"]) == 6

    explained = _run(spark, f"EXPLAIN PLAN '{uri}'", options).explain
    assert [node["state"][0]["ttl"] for node in explained["nodes"] if "state" in node] == ["20000 ms", "20000 ms"]
    _add_orders(orders, "t00", (1, "a", 10), (1, "a", 10), (2, "b", 3))
    executed = _run(spark, f"COMPILE AND EXECUTE PLAN '{uri}' FOR {EXAMPLE_1}", options)
    assert executed.compile == {"written": False, "kept_existing": True}
    assert _counts() == {"a": (1, 10), "b": (1, 3)}
    with pytest.raises(SpecError, match=rf"plan {s3_bucket}/nightly/example_1\.json exists"):
        _run(spark, f"COMPILE PLAN '{uri}' FOR {EXAMPLE_1}", options)


def test_csv_parquet_and_rate_tables_are_read_as_streams(spark: SparkSession, db: str, tmp_path: Path) -> None:
    """Every kind of source the plans read: CSV and parquet folders, and Spark's rate source, into a catalog table."""
    csv_folder = tmp_path / "csv"
    csv_folder.mkdir()
    (csv_folder / "a.csv").write_text("1,x\n2,y\n2,y\n")
    spark.sql(f"CREATE TABLE {db}.csv_events (id INT, tag STRING) USING csv LOCATION '{csv_folder}'")
    spark.sql(f"CREATE TABLE {db}.parquet_events (id INT, tag STRING) USING parquet")
    spark.sql(f"INSERT INTO {db}.parquet_events VALUES (3, 'z')")
    spark.sql(f"CREATE TABLE {db}.ticks USING rate OPTIONS (rowsPerSecond 5, numPartitions 1)")
    spark.sql(f"CREATE TABLE {db}.tags (id INT, tag STRING) USING parquet")
    spark.sql(f"CREATE TABLE {db}.tick_values (value BIGINT) USING parquet")
    plan_file = tmp_path / "sources.json"
    options = _options(tmp_path)
    sql = f"""STATEMENT SET BEGIN
        INSERT INTO {db}.tags SELECT id, tag FROM (
            SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY proctime) AS rn FROM {db}.csv_events) WHERE rn = 1;
        INSERT INTO {db}.tags SELECT id, tag FROM STREAM({db}.parquet_events);
        INSERT INTO {db}.tick_values SELECT value FROM {db}.ticks WHERE value < 3;
      END"""

    done = _run(spark, f"COMPILE AND EXECUTE PLAN '{plan_file}' FOR {sql}", options)

    assert done.compile["written"] is True
    assert [query["sink"] for query in done.execute["queries"]] == [f"{db}.tags", f"{db}.tags", f"{db}.tick_values"]
    assert sorted(map(tuple, spark.table(f"{db}.tags").collect())) == [(1, "x"), (2, "y"), (3, "z")]
    assert all(row.value < 3 for row in spark.table(f"{db}.tick_values").collect())


def test_a_buffered_plan_writes_each_keys_latest_result_and_ends_with_nothing_buffered(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "example_1.json"
    options = _options(tmp_path, **{"execution.flush.max-interval": "1 h"})
    _add_orders(orders, "a", (1, "north", 5), (2, "north", 7), (3, "south", 1), (3, "south", 1))
    first = _run(spark, f"COMPILE AND EXECUTE PLAN '{plan_file}' FOR {EXAMPLE_1}", options).execute["queries"][0]
    assert _counts() == {"north": (2, 12), "south": (1, 1)}
    assert first["buffer"] == {
        "store": "log",  # the default in front of PostgreSQL
        "records_in": 4,
        "records_emitted": 2,
        "flushes": {"interval": 0, "idle": 0, "end": 1},
    }
    assert first["write_calls"] == 1

    _add_orders(orders, "b", (4, "north", 2))
    second = _run(spark, f"EXECUTE PLAN '{plan_file}'", options, T0 + 1000).execute["queries"][0]
    assert _counts() == {"north": (3, 14), "south": (1, 1)}
    assert second["buffer"] == {
        "store": "log",
        "records_in": 1,
        "records_emitted": 1,
        "flushes": {"interval": 0, "idle": 0, "end": 1},
    }


def test_buffering_rows_that_each_count_is_refused_before_any_query(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "plain.json"
    plain = "INSERT INTO shop_counts SELECT shop, order_id AS orders, amount AS total FROM orders"
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {plain}", _options(tmp_path))
    _add_orders(orders, "a", (1, "north", 5))
    buffered = _options(tmp_path, **{"execution.flush.max-interval": "1 min"})
    with pytest.raises(SpecError) as raised:
        _run(spark, f"EXECUTE PLAN '{plan_file}'", buffered)
    assert str(raised.value) == (
        "execution.flush.max-interval buffers idempotent results only (an aggregation's, FLIP-365), but sink "
        "shop_counts takes the rows of node 1 (stream-exec-table-source-scan), each of which counts: run this plan "
        "without execution.flush.max-interval"
    )
    assert not spark.streams.active and not (tmp_path / "checkpoints").exists()
    assert _counts() == {}


def test_a_run_for_a_time_flushes_its_buffer_once_the_input_is_idle_or_at_the_end(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    """The run's outcome does not depend on the machine's speed: one flush writes the results, whether the idle
    input asked for it or the deadline came first."""
    plan_file = tmp_path / "example_1.json"
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {EXAMPLE_1}", _options(tmp_path))
    _add_orders(orders, "a", (1, "north", 5), (2, "north", 7), (3, "south", 1))
    options = dataclasses.replace(
        _options(tmp_path, **{"execution.flush.max-interval": "1 h"}), run_for="10 s", trigger_interval="200 ms"
    )
    query = _run(spark, f"EXECUTE PLAN '{plan_file}'", options).execute["queries"][0]

    assert _counts() == {"north": (2, 12), "south": (1, 1)}
    buffer = query["buffer"]
    assert (buffer["records_in"], buffer["records_emitted"]) == (3, 2)
    assert buffer["flushes"]["interval"] == 0 and buffer["flushes"]["idle"] + buffer["flushes"]["end"] == 1
    assert not spark.streams.active


SHIPPED = """
    INSERT INTO shipped_orders
    SELECT o.order_id, o.shop, s.carrier
    FROM orders o JOIN shipments s ON o.order_id = s.order_id
"""


def _edit_join(plan_file: Path, **fields: object) -> None:
    plan = json.loads(plan_file.read_text())
    node = next(node for node in plan["nodes"] if node["type"] == "stream-exec-join")
    for name, value in fields.items():
        if value is None:
            node.pop(name, None)
        else:
            node[name] = value
    plan_file.write_text(json.dumps(plan, indent=2))


def test_an_inner_join_runs_on_spark_s_join_and_a_plan_edited_to_move_it_is_refused_before_any_query(
    spark: SparkSession, orders: Path, tmp_path: Path, db: str
) -> None:
    shipments = tmp_path / "shipments"
    shipments.mkdir()
    spark.sql(f"CREATE TABLE {db}.shipments (order_id INT, carrier STRING) USING json LOCATION '{shipments}'")
    spark.sql(f"CREATE TABLE {db}.shipped_orders (order_id INT, shop STRING, carrier STRING) USING parquet")
    plan_file = tmp_path / "shipped.json"
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {SHIPPED}", _options(tmp_path, "1 min"))
    nodes = json.loads(plan_file.read_text())["nodes"]
    join_node = next(node for node in nodes if node["type"] == "stream-exec-join")
    sink_id = next(node["id"] for node in nodes if node["type"] == "stream-exec-sink")
    assert (join_node["version"], join_node["implementation"]) == (1, "spark-stream-join")

    explained = _run(spark, f"EXPLAIN PLAN '{plan_file}'", _options(tmp_path)).explain
    assert next(node for node in explained["nodes"] if node["type"] == "stream-exec-join")["implementation"] == (
        "spark-stream-join"
    )
    assert f"[{join_node['id']}] stream-exec-join_1 <- " in explained["text"]
    assert "      implementation spark-stream-join\n" in explained["text"]

    def shipped() -> list[tuple]:
        spark.catalog.refreshTable(f"{db}.shipped_orders")
        return sorted(map(tuple, spark.table(f"{db}.shipped_orders").collect()))

    execute = f"EXECUTE PLAN '{plan_file}'"
    _add_orders(orders, "t00", (1, "north", 5), (2, "south", 7))
    (shipments / "t00.json").write_text('{"order_id": 1, "carrier": "dhl"}\n')
    _run(spark, execute, _options(tmp_path), T0)
    assert shipped() == [(1, "north", "dhl")]
    # order 2 (1 min TTL) has expired when its shipment comes 90 s later
    (shipments / "t90.json").write_text('{"order_id": 2, "carrier": "ups"}\n')
    _run(spark, execute, _options(tmp_path), T0 + 90_000)
    assert shipped() == [(1, "north", "dhl")]
    # order 2 again, 5 s after its shipment
    _add_orders(orders, "t95", (2, "south", 7))
    _run(spark, execute, _options(tmp_path), T0 + 95_000)
    assert shipped() == [(1, "north", "dhl"), (2, "south", "ups")]
    # a clock gone back 15 s, behind the watermark Spark took from the batch before (89 s): Spark drops an order and
    # its shipment as late, and the report says so
    _add_orders(orders, "t80", (3, "east", 1))
    (shipments / "t80.json").write_text('{"order_id": 3, "carrier": "fedex"}\n')
    late = _run(spark, execute, _options(tmp_path), T0 + 80_000).execute["queries"][0]
    assert (late["rows_dropped_late"], late["rows_appended"]) == (2, 0)
    assert shipped() == [(1, "north", "dhl"), (2, "south", "ups")]

    _edit_join(plan_file, implementation="transform-with-state")
    with pytest.raises(SpecError) as raised:
        _run(spark, execute, _options(tmp_path), T0 + 95_000)
    assert str(raised.value) == (
        f"node {join_node['id']} (stream-exec-join) would run on transform-with-state, but checkpoint "
        f"{tmp_path / 'checkpoints'}/{flat_name([str(plan_file)])}/sink-{sink_id} holds its state as "
        "spark-stream-join keeps it, which transform-with-state cannot read: run the plan as compiled before "
        "(implementation spark-stream-join), or execute it with a new checkpoint folder"
    )
    _edit_join(plan_file, implementation="spark-stream-join", join_type="LEFT")
    _edit_state(plan_file, "stream-exec-join", "0 ms")
    for statement in (f"EXPLAIN PLAN '{plan_file}'", execute):
        with pytest.raises(SpecError) as raised:
            _run(spark, statement, _options(tmp_path), T0 + 95_000)
        assert str(raised.value) == (
            f"node {join_node['id']} (stream-exec-join): implementation spark-stream-join sends a left row that met "
            "no right row when its left TTL expires, and a left TTL of 0 ms never does: give the left side a TTL, or "
            "set its implementation to transform-with-state"
        )
    assert not spark.streams.active
    assert shipped() == [(1, "north", "dhl"), (2, "south", "ups")]


#: An order with its shipment, or alone once it can no longer meet one: a left join whose left side lives 1 min.
SHIPMENT_OR_NOT = """
    INSERT INTO order_shipments
    SELECT /*+ STATE_TTL('o' = '1 min') */ o.order_id, o.shop, s.carrier
    FROM orders o LEFT JOIN shipments s ON o.order_id = s.order_id
"""


def test_a_left_join_with_a_left_ttl_runs_on_spark_s_join_and_sends_an_order_alone_once_it_expired(
    spark: SparkSession, orders: Path, tmp_path: Path, db: str
) -> None:
    """On Spark's join the left join only inserts (a catalog table takes it): the order without a shipment comes
    once, null-padded, in the run where its TTL has passed, not at once and then retracted."""
    shipments = tmp_path / "shipments"
    shipments.mkdir()
    spark.sql(f"CREATE TABLE {db}.shipments (order_id INT, carrier STRING) USING json LOCATION '{shipments}'")
    spark.sql(f"CREATE TABLE {db}.order_shipments (order_id INT, shop STRING, carrier STRING) USING parquet")
    plan_file = tmp_path / "order_shipments.json"
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {SHIPMENT_OR_NOT}", _options(tmp_path))
    join_node = next(node for node in json.loads(plan_file.read_text())["nodes"] if node["type"] == "stream-exec-join")
    assert (join_node["join_type"], join_node["implementation"]) == ("LEFT", "spark-stream-join")

    def order_shipments() -> list[tuple]:
        spark.catalog.refreshTable(f"{db}.order_shipments")
        return sorted(map(tuple, spark.table(f"{db}.order_shipments").collect()), key=str)

    execute = f"EXECUTE PLAN '{plan_file}'"
    _add_orders(orders, "t00", (1, "north", 5), (2, "south", 7))
    (shipments / "t00.json").write_text('{"order_id": 1, "carrier": "dhl"}\n')
    _run(spark, execute, _options(tmp_path), T0)
    assert order_shipments() == [(1, "north", "dhl")]  # order 2 may still meet its shipment
    _add_orders(orders, "t40", (3, "east", 1))
    _run(spark, execute, _options(tmp_path), T0 + 40_000)
    assert order_shipments() == [(1, "north", "dhl")]
    # 90 s on, order 2 (1 min TTL) has expired unmatched: its shipment misses it, and it is sent alone in this run;
    # order 3 meets its shipment 50 s after it came
    (shipments / "t90.json").write_text('{"order_id": 2, "carrier": "ups"}\n{"order_id": 3, "carrier": "fedex"}\n')
    _run(spark, execute, _options(tmp_path), T0 + 90_000)
    assert order_shipments() == [(1, "north", "dhl"), (2, "south", None), (3, "east", "fedex")]
    # orders that met a shipment expire without being sent alone
    _add_orders(orders, "t200", (4, "west", 2))
    _run(spark, execute, _options(tmp_path), T0 + 200_000)
    assert order_shipments() == [(1, "north", "dhl"), (2, "south", None), (3, "east", "fedex")]

    # without a TTL on the orders, the left join stays on transform-with-state, which updates its rows
    unbounded = SHIPMENT_OR_NOT.replace("'o' = '1 min'", "'s' = '1 min'")
    with pytest.raises(SpecError, match=r"the query updates its results .* but order_shipments is a catalog table"):
        _run(spark, f"COMPILE PLAN '{tmp_path / 'unbounded.json'}' FOR {unbounded}", _options(tmp_path))


def test_a_sink_query_that_fails_names_its_sink_and_query_first(
    spark: SparkSession, orders: Path, tmp_path: Path
) -> None:
    plan_file = tmp_path / "plans" / "dividing.json"
    dividing = (
        "INSERT INTO shop_counts SELECT shop, COUNT(*) AS orders, SUM(amount DIV (amount - 10)) AS total FROM orders "
        "GROUP BY shop"
    )
    _run(spark, f"COMPILE PLAN '{plan_file}' FOR {dividing}", _options(tmp_path))
    _add_orders(orders, "first", (1, "shop_a", 10))  # divides by zero: the query fails while it runs

    with pytest.raises(JobError) as raised:
        _run(spark, f"EXECUTE PLAN '{plan_file}'", _options(tmp_path))

    assert re.fullmatch(
        r"sink shop_counts \(query plan_sink_\d+\): \[DIVIDE_BY_ZERO\] Division by zero\. Use `try_divide` to "
        r"tolerate divisor being 0 and return NULL instead\. .* SQLSTATE: 22012",
        str(raised.value),
    ), str(raised.value)
