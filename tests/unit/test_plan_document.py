"""The compiled plan document: read back as written, every bad edit refused in one line, EXPLAIN's graph and
warnings."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from typing import Any

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.explain import explain, explain_text, left_join_warnings
from spark_tables.core.streaming.sources import KafkaTopicSource


def example_2(state: bool = True) -> dict[str, Any]:
    """FLIP-292's Example 2 as a plan: orders LEFT JOIN customers, counted by customer, into PostgreSQL."""
    schema = [{"name": "id", "type": "int", "nullable": True}]
    nodes: list[dict[str, Any]] = [
        {"id": 1, "type": "stream-exec-table-source-scan", "version": 1, "inputs": [], "table": "orders",
         "output_schema": schema, "description": "TableSourceScan(table=[orders])"},
        {"id": 2, "type": "stream-exec-table-source-scan", "version": 1, "inputs": [], "table": "customers",
         "output_schema": schema, "description": "TableSourceScan(table=[customers])"},
        {"id": 3, "type": "stream-exec-join", "version": 1, "inputs": [1, 2], "join_type": "LEFT",
         "left_key": ["cid"], "right_key": ["id"], "implementation": "transform-with-state",
         "output_schema": schema, "description": "Join(...)",
         "state": [{"index": 0, "ttl": "259200000 ms", "name": "leftState"},
                   {"index": 1, "ttl": "86400000 ms", "name": "rightState"}]},
        {"id": 4, "type": "stream-exec-group-aggregate", "version": 1, "inputs": [3], "key": ["cid"],
         "aggregates": [{"function": "count", "column": None, "output": "n", "distinct": False}],
         "output_schema": schema, "description": "GroupAggregate(...)",
         "state": [{"index": 0, "ttl": "3600000 ms", "name": "groupAggregateState"}]},
        {"id": 5, "type": "stream-exec-sink", "version": 1, "inputs": [4], "sink": "counts",
         "output_schema": schema, "description": "Sink(table=[counts])"},
    ]  # fmt: skip
    if not state:
        for node in nodes:
            node.pop("state", None)
    return {
        "format_version": 1,
        "configuration": {"table.exec.state.ttl": "0 ms"},
        "statements": ["INSERT INTO counts SELECT ..."],
        "sources": ["orders", "customers"],
        "sinks": [{"name": "counts", "kind": "postgres-upsert", "conn_id": "pg", "table": "counts", "key": ["cid"]}],
        "nodes": nodes,
    }


def test_a_plan_reads_back_to_the_same_text() -> None:
    plan = CompiledPlan.from_dict(example_2())
    assert json.loads(plan.to_json()) == example_2()
    assert CompiledPlan.from_json(plan.to_json()).to_json() == plan.to_json()


def test_editing_one_entry_changes_only_that_sides_retention() -> None:
    edited = example_2()
    edited["nodes"][2]["state"][1]["ttl"] = "12 h"
    plan = CompiledPlan.from_dict(edited)
    join, aggregate = plan.node(3), plan.node(4)
    assert [entry.ttl for entry in join.state] == [timedelta(days=3), timedelta(hours=12)]
    assert [entry.ttl for entry in aggregate.state] == [timedelta(hours=1)]


def test_a_plan_without_state_runs_with_the_jobs_ttl() -> None:
    plan = CompiledPlan.from_dict(example_2(state=False))
    assert plan.node(3).state is None
    assert [entry.ttl_ms for entry in plan.node(3).effective_state(timedelta(minutes=5))] == [300_000, 300_000]
    explained = explain(plan, timedelta(minutes=5))
    assert explained["nodes"][2]["state"][0]["from"] == "job"


def _edited(path: list[Any], value: Any, delete: bool = False) -> dict[str, Any]:
    document = copy.deepcopy(example_2())
    target = document
    for step in path[:-1]:
        target = target[step]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_edited(["format_version"], 2), "format version 2, newer than this provider reads (1): upgrade"),
        (_edited(["format_version"], None, delete=True), "has no format_version"),
        (_edited(["nodes", 2, "type"], "stream-exec-interval-join"), "type 'stream-exec-interval-join' does not exist"),
        (_edited(["nodes", 2, "version"], 7), "version 7 is not known"),
        (_edited(["nodes", 2, "state", 0, "ttl"], "-1 ms"), "is negative"),
        (_edited(["nodes", 2, "state", 0, "ttl"], "abc"), "is not a duration"),
        (
            _edited(["nodes", 3, "state"], [{"index": 0, "ttl": "1 s"}, {"index": 1, "ttl": "1 s"}]),
            "2 state entries for 1",
        ),
        (_edited(["nodes", 4, "state"], [{"index": 0, "ttl": "1 s"}]), "keeps no state"),
        (_edited(["nodes", 2, "inputs"], [1]), "has 1 input(s): stream-exec-join takes 2"),
        (_edited(["nodes", 2, "inputs"], [1, 9]), "reads node 9, which does not come before it"),
        (_edited(["nodes", 2, "join_type"], "FULL"), "join_type 'FULL' is invalid"),
        (_edited(["nodes", 3, "aggregates", 0, "function"], "median"), "aggregate 'median' is not supported"),
        (_edited(["nodes", 4, "sink"], "elsewhere"), "writes sink elsewhere, which sinks does not declare"),
        (_edited(["sources"], ["orders"]), "reads table customers, which sources does not list"),
        (_edited(["nodes", 1, "id"], 1), "node id 1 is used twice"),
        (_edited(["nodes", 2, "retention"], "1 d"), "unknown field(s) ['retention']"),
        (
            _edited(["nodes", 2, "implementation"], None, delete=True),
            "implementation None is invalid: use one of spark-stream-join, transform-with-state",
        ),
        (_edited(["nodes", 2, "version"], 2), "version 2 is not known: this provider reads version(s) 1; recompile"),
    ],
)
def test_bad_edits_fail_with_one_line(document: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as raised:
        CompiledPlan.from_json(json.dumps(document), where="plan s3://plans/p.json")
    assert message in str(raised.value)
    assert str(raised.value).startswith("plan s3://plans/p.json")
    assert "\n" not in str(raised.value)


def test_malformed_json_fails_with_one_line() -> None:
    with pytest.raises(SpecError, match=r"^plan /tmp/p\.json is not valid JSON \(Expecting"):
        CompiledPlan.from_json('{"format_version": 1,', where="plan /tmp/p.json")


def test_explain_gives_the_graph_with_each_operators_ttl_and_warns_where_downstream_is_shorter() -> None:
    plan = CompiledPlan.from_dict(example_2())
    explained = explain(plan, timedelta(0))
    assert explained["edges"] == [[1, 3], [2, 3], [3, 4], [4, 5]]
    join = explained["nodes"][2]
    assert [(s["name"], s["ttl"], s["ttl_ms"], s["from"]) for s in join["state"]] == [
        ("leftState", "259200000 ms", 259_200_000, "plan"),
        ("rightState", "86400000 ms", 86_400_000, "plan"),
    ]
    assert "state" not in explained["nodes"][0]
    # the aggregation keeps 1 h, less than both join sides upstream (3 d and 1 d)
    assert len(explained["warnings"]) == 2
    assert explained["warnings"][0].startswith(
        "node 4 (stream-exec-group-aggregate) keeps its groupAggregateState for 3600000 ms, less than node 3 "
        "(stream-exec-join) upstream keeps its leftState (259200000 ms)"
    )
    text = explain_text(explained, "/plans/p.json")
    assert "[3] stream-exec-join_1 <- 1, 2: Join(...)" in text
    assert "state 1 rightState: ttl 86400000 ms (plan)" in text


def test_no_warning_when_ttls_grow_downstream_and_zero_means_for_ever() -> None:
    aligned = _edited(["nodes", 3, "state", 0, "ttl"], "0 ms")
    assert explain(CompiledPlan.from_dict(aligned), timedelta(0))["warnings"] == []
    upstream_forever = _edited(["nodes", 2, "state", 1, "ttl"], "0 ms")
    warnings = explain(CompiledPlan.from_dict(upstream_forever), timedelta(0))["warnings"]
    assert any("rightState (ever (0 ms))" in warning for warning in warnings)


def test_a_join_names_its_implementation_and_explain_shows_it() -> None:
    document = _edited(["nodes", 2, "implementation"], "spark-stream-join")
    plan = CompiledPlan.from_dict(document)
    assert plan.node(3).runs_on == "spark-stream-join"
    assert json.loads(plan.to_json())["nodes"][2]["implementation"] == "spark-stream-join"
    assert plan.node(4).runs_on == "transform-with-state" and plan.node(1).runs_on is None
    explained = explain(plan, timedelta(0))
    assert explained["nodes"][2]["implementation"] == "spark-stream-join"
    assert "implementation" not in explained["nodes"][0]
    assert "[3] stream-exec-join_1 <- 1, 2: Join(...)\n      implementation spark-stream-join\n" in explain_text(
        explained, "p"
    )


def _with_deduplication(**fields: Any) -> dict[str, Any]:
    """Example 2 with its orders deduplicated by id before the join."""
    document = example_2()
    document["nodes"].insert(2, {
        "id": 6, "type": "stream-exec-deduplicate", "inputs": [1], "key": ["id"], "keep": "first",
        "output_schema": document["nodes"][0]["output_schema"], "description": "Deduplicate(...)", **fields,
    })  # fmt: skip
    document["nodes"][3]["inputs"] = [6, 2]
    return document


def test_a_deduplication_names_its_implementation_one_a_deduplication_may_use() -> None:
    plan = CompiledPlan.from_dict(_with_deduplication(implementation="spark-drop-duplicates"))
    assert plan.node(6).runs_on == "spark-drop-duplicates"
    assert json.loads(plan.to_json())["nodes"][2]["implementation"] == "spark-drop-duplicates"
    text = explain_text(explain(plan, timedelta(0)), "p")
    assert "[6] stream-exec-deduplicate_1 <- 1: Deduplicate(...)\n      implementation spark-drop-duplicates\n" in text
    with pytest.raises(SpecError, match="implementation 'spark-stream-join' is invalid: use one of "
                       "spark-drop-duplicates, transform-with-state"):  # fmt: skip
        CompiledPlan.from_dict(_with_deduplication(implementation="spark-stream-join"))


def test_a_left_join_on_spark_s_join_feeding_transform_with_state_is_warned_of() -> None:
    """Example 2's left join on Spark's join, counted on transform-with-state: its query runs no no-data
    micro-batches, so an order that met no customer is sent later than its TTL."""
    document = _edited(["nodes", 2, "implementation"], "spark-stream-join")
    assert left_join_warnings(CompiledPlan.from_dict(document)) == [
        "node 3 (stream-exec-join) sends a left row that met no right row once its TTL has passed, but its query also "
        "runs node 4 on transform-with-state, and so without no-data micro-batches: such a row comes with a later "
        "micro-batch that has rows, not in the run after its TTL; set the join's implementation to "
        "transform-with-state to send it at once"
    ]
    for field, value in (("implementation", "transform-with-state"), ("join_type", "INNER")):
        edited = copy.deepcopy(document)
        edited["nodes"][2][field] = value
        assert left_join_warnings(CompiledPlan.from_dict(edited)) == []
    assert explain(CompiledPlan.from_dict(document), timedelta(0))["warnings"][-1].startswith(
        "node 3 (stream-exec-join) sends"
    )


def test_a_scan_of_a_declared_kafka_source_keeps_it_and_others_write_no_source_field() -> None:
    document = example_2()
    document["nodes"][0]["source"] = KafkaTopicSource("orders", "shop.orders", "id INT, cid INT").to_dict()
    plan = CompiledPlan.from_dict(document)
    assert plan.nodes[0].source == KafkaTopicSource("orders", "shop.orders", "id INT, cid INT")
    assert json.loads(plan.to_json()) == document
    assert "source" not in json.loads(plan.to_json())["nodes"][1], "a catalog table's scan: as plans were"
    document["nodes"][0]["source"]["on_malformed"] = "drop"
    with pytest.raises(SpecError, match="kafka source orders: on_malformed 'drop' is not one of fail, skip"):
        CompiledPlan.from_dict(document)
