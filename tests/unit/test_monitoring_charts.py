"""The monitoring pages' SVG: bar charts, and a compiled plan's graph with each operator's state TTL."""

from __future__ import annotations

import re
from typing import Any

from spark_tables.plugins.monitoring.charts import Group, bar_chart, plan_graph


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


def test_a_stateful_node_shows_the_operator_it_runs_on() -> None:
    svg = plan_graph(
        [{**node(1, "join", [], ("leftState", 0), ("rightState", 0)), "implementation": "spark-stream-join"}]
    )
    assert ">1: join on spark-stream-join<" in svg


def test_a_node_sits_one_layer_right_of_its_furthest_input() -> None:
    svg = plan_graph(JOIN_PLAN)
    x_of = {int(m.group(2)): float(m.group(1)) for m in re.finditer(r'<text x="([\d.]+)" y="[\d.]+">(\d+): ', svg)}
    assert x_of[1] == x_of[2] < x_of[3] < x_of[4] < x_of[5]


def test_a_ttl_of_zero_keeps_state_forever() -> None:
    assert "dedup TTL none (kept forever)" in plan_graph([node(1, "deduplicate", [], ("dedup", 0))])


def test_nothing_to_draw_draws_nothing() -> None:
    assert plan_graph([]) == ""
    assert bar_chart("t", [Group("a", [None])], ["s"]) == ""


def test_bars_are_scaled_to_the_largest_value_and_labels_escaped() -> None:
    svg = bar_chart("hit <rate>", [Group("<a>", [50.0]), Group("b", [100.0])], ["hit rate"], " %")
    widths = [float(w) for w in re.findall(r'<rect class="bar c0" [^>]*width="([\d.]+)"', svg)]
    assert widths[1] == 2 * widths[0]
    assert "<a>" not in svg and "&lt;a&gt;" in svg and "hit &lt;rate&gt;" in svg


def labels(svg: str) -> list[str]:
    return re.findall(r'<text class="label" [^>]*>([^<]*)</text>', svg)


def legend(svg: str) -> list[tuple[str, str]]:
    """The legend's keys: each swatch's colour class and its name."""
    keys = svg.split('<g class="legend"', 1)[1]
    return re.findall(r'<rect class="bar (c\d)"[^>]*/><text[^>]*>([^<]*)</text>', keys)


def test_each_series_has_a_colour_in_the_legend() -> None:
    svg = bar_chart(
        "mean times", [Group("etl · b", [6.0, 1.0]), Group("report · b", [2.0, None])], ["recompute", "read"]
    )
    assert legend(svg) == [("c0", "recompute"), ("c1", "read")]
    assert re.findall(r'<rect class="bar (c\d)" x=', svg.split('<g class="legend"')[0]) == ["c0", "c1", "c0"]


def test_keyed_bars_take_their_keys_colour_in_the_order_given_and_name_it() -> None:
    groups = [
        Group("manual 2026-11-25 22:03:43 · FULL", [100.0], "FULL"),
        Group("manual 2026-11-25 22:03:43 · NONE", [0.0], "NONE"),
        Group("manual 2026-11-25 22:10:01 · PARTIAL", [89.0], "PARTIAL"),
    ]
    svg = bar_chart("hit rate", groups, ["hit rate"], " %", keys=("NONE", "PARTIAL", "FULL"))
    assert legend(svg) == [("c0", "NONE"), ("c1", "PARTIAL"), ("c2", "FULL")]
    bars = re.findall(r'<rect class="bar (c\d)" x=[^>]*><title>([^<]*)</title>', svg)
    assert bars == [
        ("c2", "manual 2026-11-25 22:03:43 · FULL: hit rate (FULL) 100 %"),
        ("c0", "manual 2026-11-25 22:03:43 · NONE: hit rate (NONE) 0 %"),
        ("c1", "manual 2026-11-25 22:10:01 · PARTIAL: hit rate (PARTIAL) 89 %"),
    ]
    assert labels(svg) == [group.label for group in groups], "labels this long are shown whole"


def test_a_label_too_long_keeps_its_start_and_its_end_so_labels_stay_apart() -> None:
    runs = [f"a_run_id_of_some_length_that_only_differs_at_the_end_{'x' * 30}_{n}" for n in (1, 2)]
    shown = labels(bar_chart("t", [Group(run, [1.0]) for run in runs], ["s"]))
    assert len(set(shown)) == 2 and all("…" in label for label in shown)
    assert [label[-2:] for label in shown] == ["_1", "_2"]
