"""The monitoring pages' SVG: bar charts, and a compiled plan's graph with each operator's state TTL."""

from __future__ import annotations

import re
from typing import Any

from spark_tables.plugins.monitoring.charts import bar_chart, plan_graph


def node(node_id: int, kind: str, inputs: list[int], *ttls: tuple[str, int]) -> dict[str, Any]:
    state = [
        {"index": i, "name": name, "ttl_ms": ms, "ttl": f"{ms} ms", "from": "plan"} for i, (name, ms) in enumerate(ttls)
    ]
    return {
        "id": node_id,
        "type": f"stream-exec-{kind}",
        "inputs": inputs,
        "description": f"{kind} <{node_id}>",
        **({"state": state} if state else {}),
    }


#: The join of compiled-plans.md's second example, as EXPLAIN PLAN describes it.
JOIN_PLAN = [
    node(1, "table-source-scan", []),
    node(2, "table-source-scan", []),
    node(3, "calc", [2]),
    node(4, "join", [1, 3], ("leftState", 3_600_000), ("rightState", 7 * 86_400_000)),
    node(5, "sink", [4]),
]


def test_a_plan_graph_draws_every_node_and_edge_with_its_state_ttls() -> None:
    svg = plan_graph(JOIN_PLAN)
    assert svg.count('<g class="node') == 5
    assert svg.count('<g class="node stateful"') == 1
    assert svg.count('<line class="edge"') == 4
    assert "leftState TTL 1 h, rightState TTL 7 d" in svg
    assert "join &lt;4&gt;" in svg  # descriptions are escaped


def test_a_node_sits_one_layer_right_of_its_furthest_input() -> None:
    svg = plan_graph(JOIN_PLAN)
    x_of = {int(m.group(2)): float(m.group(1)) for m in re.finditer(r'<text x="([\d.]+)" y="[\d.]+">(\d+): ', svg)}
    assert x_of[1] == x_of[2] < x_of[3] < x_of[4] < x_of[5]


def test_a_ttl_of_zero_keeps_state_forever() -> None:
    assert "dedup TTL none (kept forever)" in plan_graph([node(1, "deduplicate", [], ("dedup", 0))])


def test_nothing_to_draw_draws_nothing() -> None:
    assert plan_graph([]) == ""
    assert bar_chart("t", [("a", [None])], ["s"]) == ""


def test_bars_are_scaled_to_the_largest_value_and_labels_escaped() -> None:
    svg = bar_chart("hit <rate>", [("<a>", [50.0]), ("b", [100.0])], ["hit rate"], " %")
    widths = [float(w) for w in re.findall(r'<rect class="bar" [^>]*width="([\d.]+)"', svg)]
    assert widths[1] == 2 * widths[0]
    assert "<a>" not in svg and "&lt;a&gt;" in svg and "hit &lt;rate&gt;" in svg
