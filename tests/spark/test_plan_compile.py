"""COMPILE PLAN: Spark SQL into a plan of nodes, each stateful one with its state TTL; names and types from Spark's
analyzer; everything that cannot compile refused in one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.nodes import GroupAggregate, SourceScan
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.plan.compiler import compile_plan
from spark_tables.jobs.plan.pipeline import Pipeline
from spark_tables.jobs.streaming.clock import BatchClock
from spark_tables.tasks.sql_reader import read_plan_statement

pytestmark = pytest.mark.spark

COUNTS = PostgresUpsertSink(name="shop_counts", conn_id="pg", table="public.shop_counts", key=("shop",))
DEDUPLICATED_COUNT = """
    INSERT INTO shop_counts
    SELECT shop, COUNT(*) AS orders, SUM(amount) AS total, COUNT(DISTINCT customer) AS customers
    FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY proctime) AS rn FROM orders)
    WHERE rn = 1
    GROUP BY shop
"""


@pytest.fixture
def tables(spark: SparkSession, db: str, tmp_path: Path) -> Iterator[str]:
    """A database with JSON-file stream tables ``orders`` and ``customers``, and a parquet table ``big_orders``."""
    for name, columns in {
        "orders": "order_id INT, shop STRING, customer INT, amount INT",
        "customers": "id INT, name STRING, tier STRING",
    }.items():
        (tmp_path / name).mkdir()
        spark.sql(f"CREATE TABLE {db}.{name} ({columns}) USING json LOCATION '{tmp_path / name}'")
    spark.sql(f"CREATE TABLE {db}.big_orders (order_id BIGINT, amount DOUBLE) USING parquet")
    spark.sql(f"USE {db}")
    yield db
    spark.sql("USE default")


def _compiled(spark: SparkSession, sql: str, ttl: str = "0 ms") -> CompiledPlan:
    inserts = read_plan_statement(f"COMPILE PLAN 'file:///plan.json' FOR {sql}").inserts  # as the reader gives them
    return compile_plan(spark, inserts, {"table.exec.state.ttl": ttl}, [COUNTS])


def test_example_1_compiles_a_deduplication_feeding_an_aggregation(spark: SparkSession, tables: str) -> None:
    plan = _compiled(spark, DEDUPLICATED_COUNT, ttl="1 h")

    assert [node.TYPE for node in plan.nodes] == [
        "stream-exec-table-source-scan",
        "stream-exec-deduplicate",
        "stream-exec-calc",
        "stream-exec-group-aggregate",
        "stream-exec-calc",
        "stream-exec-sink",
    ]
    scan, dedup, _, aggregate, final, sink = plan.nodes
    assert plan.sources == ("orders",) and scan.table == "orders"
    assert (dedup.key, dedup.keep) == (("order_id",), "first")
    assert dedup.description == "Deduplicate(keep=[FirstRow], key=[order_id], order=[PROCTIME])"
    assert [entry.to_dict() for entry in dedup.state] == [{"index": 0, "ttl": "3600000 ms", "name": "deduplicateState"}]
    assert aggregate.key == ("shop",)
    assert [call.describe() for call in aggregate.aggregates] == [
        "COUNT(*) AS __agg0",
        "SUM(amount) AS __agg1",
        "COUNT(DISTINCT customer) AS __agg2",
    ]
    assert [entry.name for entry in aggregate.state] == ["groupAggregateState"]
    # names and types come from Spark's analyzer
    assert [(c.name, c.type) for c in final.output_schema] == [
        ("shop", "string"),
        ("orders", "bigint"),
        ("total", "bigint"),
        ("customers", "bigint"),
    ]
    assert sink.sink == "shop_counts" and plan.sinks == (COUNTS,)
    assert plan.configuration == {"table.exec.state.ttl": "1 h"}
    # the same SQL compiles to the same text: plans diff cleanly
    assert _compiled(spark, DEDUPLICATED_COUNT, ttl="1 h").to_json() == plan.to_json()
    assert CompiledPlan.from_json(plan.to_json()) == plan


def test_keep_last_orders_by_proctime_descending(spark: SparkSession, tables: str) -> None:
    plan = _compiled(
        spark,
        """INSERT INTO shop_counts SELECT shop, COUNT(*) AS n FROM (
             SELECT order_id, shop, ROW_NUMBER() OVER (PARTITION BY order_id ORDER BY PROCTIME() DESC) AS row_num
             FROM STREAM(orders)) WHERE row_num <= 1 GROUP BY shop""",
    )
    dedup = next(node for node in plan.nodes if node.TYPE == "stream-exec-deduplicate")
    assert dedup.keep == "last"
    assert [c.name for c in dedup.output_schema] == ["order_id", "shop"]


def test_example_2_join_sides_take_their_ttls_from_a_state_ttl_hint(spark: SparkSession, tables: str) -> None:
    plan = _compiled(
        spark,
        """INSERT INTO shop_counts
           SELECT /*+ STATE_TTL('o' = '3d', 'c' = '1d') */ o.shop, c.name AS shop_name, o.amount, c.id
           FROM orders o LEFT JOIN customers c ON o.customer = c.id AND c.tier = 'gold'""",
        ttl="12 h",
    )
    join = next(node for node in plan.nodes if node.TYPE == "stream-exec-join")
    assert (join.join_type, join.left_key, join.right_key) == ("LEFT", ("customer",), ("id",))
    assert [entry.to_dict() for entry in join.state] == [
        {"index": 0, "ttl": "259200000 ms", "name": "leftState"},
        {"index": 1, "ttl": "86400000 ms", "name": "rightState"},
    ]
    # the right side's own condition is a filter before the join; its id is renamed apart from the left's names
    right_filter = plan.node(join.inputs[1])
    assert right_filter.TYPE == "stream-exec-calc" and "tier" in right_filter.condition
    final = plan.nodes[-2]
    assert [(c.name, c.nullable) for c in final.output_schema][:2] == [("shop", True), ("shop_name", True)]


def test_an_aggregations_hint_names_its_table(spark: SparkSession, tables: str) -> None:
    plan = _compiled(
        spark,
        "INSERT INTO shop_counts SELECT /*+ STATE_TTL('orders' = '20 s') */ shop, MAX(amount) AS top FROM orders "
        "GROUP BY shop HAVING MIN(amount) > 0",
    )
    aggregate = next(node for node in plan.nodes if node.TYPE == "stream-exec-group-aggregate")
    assert aggregate.state[0].ttl_ms == 20_000
    assert "__agg1 > 0" in plan.nodes[-2].condition.replace("`", "")


def test_an_insert_only_query_goes_into_a_catalog_table_cast_to_its_columns(spark: SparkSession, tables: str) -> None:
    plan = _compiled(
        spark,
        """STATEMENT SET BEGIN
             INSERT INTO big_orders SELECT order_id, amount FROM orders WHERE amount > 10;
             INSERT INTO big_orders SELECT o.order_id, o.amount FROM orders o JOIN customers c ON o.customer = c.id;
           END""",
    )
    assert [sink.to_dict() for sink in plan.sinks] == [{"name": "big_orders", "kind": "table"}]
    sinks = [node for node in plan.nodes if node.TYPE == "stream-exec-sink"]
    assert len(sinks) == 2 and len(plan.statements) == 2
    cast = plan.node(sinks[0].inputs[0])
    assert [(c.name, c.type) for c in cast.output_schema] == [("order_id", "bigint"), ("amount", "double")]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO shop_counts SELECT * FROM nowhere", "TABLE_OR_VIEW_NOT_FOUND"),
        ("INSERT INTO shop_counts SELECT shop, colour FROM orders", "column colour is not in the input"),
        (
            "INSERT INTO shop_counts SELECT o.shop FROM orders o RIGHT JOIN customers c ON o.customer = c.id",
            "RIGHT JOIN is not supported",
        ),
        (
            "INSERT INTO shop_counts SELECT o.shop FROM orders o JOIN customers c ON o.amount > c.id",
            "the join has no equality between a column of each side",
        ),
        (
            "INSERT INTO shop_counts SELECT shop, STDDEV(amount) AS s FROM orders GROUP BY shop",
            "aggregate STDDEV(amount) is not supported",
        ),
        (
            "INSERT INTO big_orders SELECT order_id, SUM(amount) FROM orders GROUP BY order_id",
            "big_orders is a catalog table appended to, which takes inserted rows only: write into a "
            "PostgresUpsertSink, or declare the table kept by key (a TableUpsertSink in catalog_sinks)",
        ),
        (
            "INSERT INTO shop_counts SELECT /*+ STATE_TTL('x' = '1d') */ shop, COUNT(*) AS n FROM orders GROUP BY shop",
            "STATE_TTL names ['x']",
        ),
        (
            "INSERT INTO shop_counts SELECT /*+ STATE_TTL('orders' = '-1 ms') */ shop, COUNT(*) FROM orders "
            "GROUP BY shop",
            "is negative",
        ),
        ("INSERT INTO shop_counts SELECT shop FROM orders ORDER BY shop", "ORDER in a streaming plan is not supported"),
        (
            "INSERT INTO shop_counts SELECT shop FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY shop ORDER BY amount) "
            "AS rn FROM orders) WHERE rn = 1",
            "a deduplication orders by processing time",
        ),
        (
            "INSERT INTO shop_counts SELECT shop, n FROM (SELECT shop, n, ROW_NUMBER() OVER (PARTITION BY shop "
            "ORDER BY proctime) AS rn FROM (SELECT shop, COUNT(*) AS n FROM orders GROUP BY shop)) WHERE rn = 1",
            "(stream-exec-deduplicate) needs an insert-only input, but node 5 updates its rows",
        ),
        ("INSERT INTO shop_counts SELECT order_id FROM orders", "the query has no column(s) ['shop'] of its key"),
        ("INSERT INTO big_orders SELECT order_id FROM orders", "the query gives 1 column(s), table big_orders has 2"),
    ],
)
def test_what_cannot_compile_fails_in_one_line(spark: SparkSession, tables: str, sql: str, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        _compiled(spark, sql)
    assert message in str(raised.value)
    assert str(raised.value).startswith("COMPILE PLAN, INSERT INTO")
    assert "\n" not in str(raised.value)
    assert not spark.streams.active


def test_the_plan_is_json_a_person_reads(spark: SparkSession, tables: str) -> None:
    document = json.loads(_compiled(spark, DEDUPLICATED_COUNT).to_json())
    assert document["format_version"] == 1
    assert list(document["nodes"][1]) == [
        "id", "type", "version", "inputs", "key", "keep", "implementation", "output_schema", "description", "state",
    ]  # fmt: skip
    assert document["nodes"][1]["state"] == [{"index": 0, "ttl": "0 ms", "name": "deduplicateState"}]
    assert (document["nodes"][1]["version"], document["nodes"][1]["implementation"]) == (1, "spark-drop-duplicates")


def test_where_conditions_on_one_side_of_a_join_filter_it_before_the_join(spark: SparkSession, tables: str) -> None:
    inner = _compiled(
        spark,
        """INSERT INTO shop_counts SELECT o.shop, c.name FROM orders o JOIN customers c ON o.customer = c.id
           WHERE c.tier = 'gold' AND o.amount > 10 AND o.amount > c.id""",
    )
    join = next(node for node in inner.nodes if node.TYPE == "stream-exec-join")
    left_input, right_input = (inner.node(node_id) for node_id in join.inputs)
    assert "amount" in left_input.condition and "tier" in right_input.condition
    after = inner.node(join.id + 1)
    assert after.TYPE == "stream-exec-calc" and after.condition.replace("`", "") == "amount > id"

    left = _compiled(
        spark,
        """INSERT INTO shop_counts SELECT o.shop, c.name FROM orders o LEFT JOIN customers c ON o.customer = c.id
           WHERE c.tier = 'gold' AND o.amount > 10""",
    )
    join = next(node for node in left.nodes if node.TYPE == "stream-exec-join")
    assert "amount" in left.node(join.inputs[0]).condition
    assert left.node(join.inputs[1]).TYPE == "stream-exec-table-source-scan"  # a right-side WHERE drops null rows
    assert "tier" in left.node(join.id + 1).condition


@pytest.mark.parametrize(
    ("sql", "aggregation_input_inserts_only"),
    [
        (DEDUPLICATED_COUNT, True),
        (DEDUPLICATED_COUNT.replace("ORDER BY proctime", "ORDER BY proctime DESC"), False),
        ("INSERT INTO shop_counts SELECT shop, MIN(amount) AS low FROM orders GROUP BY shop", True),
        (
            "INSERT INTO shop_counts SELECT o.shop, MAX(c.id) AS top FROM orders o JOIN customers c "
            "ON o.customer = c.id GROUP BY o.shop",
            True,
        ),
        (
            "INSERT INTO shop_counts SELECT o.shop, MAX(c.id) AS top FROM orders o LEFT JOIN customers c "
            "ON o.customer = c.id GROUP BY o.shop",
            False,
        ),
    ],
)
def test_which_inputs_only_insert_is_inferred_node_by_node(
    spark: SparkSession, tables: str, sql: str, aggregation_input_inserts_only: bool
) -> None:
    plan = _compiled(spark, sql)
    pipeline = Pipeline(spark, timedelta(0), BatchClock())
    for node in plan.nodes:
        pipeline.add(node)
    aggregation = next(node for node in plan.nodes if isinstance(node, GroupAggregate))
    assert pipeline.insert_only[aggregation.inputs[0]] is aggregation_input_inserts_only
    assert pipeline.insert_only[aggregation.id] is False
    assert all(pipeline.insert_only[node.id] for node in plan.nodes if isinstance(node, SourceScan))
