"""Bar charts drawn as inline SVG on the server: no script and no asset from elsewhere, so a page works offline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any


@dataclass(frozen=True)
class Group:
    """A row of bars: its label (which run, which table), one value per series (None: no value), and the key that
    colours its bars (a cache mode), if the chart's colours say that rather than which series a bar is."""

    label: str
    values: Sequence[float | None]
    key: str | None = None


#: The chart's width besides its labels, the bars' longest, and the label's width per character; a bar's height
#: alone in its row and beside others (a value's text, 11 px, fits beside its own bar), and the gap between rows.
BAR_AREA, VALUE_WIDTH, CHAR_WIDTH = 300, 70, 6.3
BAR_ALONE, BAR_BESIDE, ROW_GAP = 14, 12, 4
#: The labels' width at most (px): a longer label is shortened in its middle, its start and its end kept.
LABEL_MAX = 300
#: The bars' colours, as CSS classes ``c0`` .. ``c5``: by key when the chart has keys, else by series.
COLOURS = 6
LEGEND_GAP = 14


def bar_chart(
    title: str, groups: Sequence[Group], series: Sequence[str], unit: str = "", keys: Sequence[str] = ()
) -> str:
    """Horizontal bars, a row per group and a bar per series, scaled to the largest value, with a legend that
    keys each colour: a series, or, for groups with keys, a key (in the order of ``keys``, then as they come);
    '' without values. A label is never cut to look like another: a long one keeps its start and its end."""
    values = [value for group in groups for value in group.values if value is not None]
    if not values:
        return ""
    top = max(values) or 1.0
    keyed = {group.key for group in groups if group.key is not None}
    order = [*keys, *dict.fromkeys(g.key for g in groups if g.key is not None and g.key not in keys)]
    colour = {key: order.index(key) % COLOURS for key in order if key in keyed}
    legend = list(colour) or list(series)
    labels = [_short(group.label, int(LABEL_MAX // CHAR_WIDTH)) for group in groups]
    label_width = min(LABEL_MAX, CHAR_WIDTH * max(len(label) for label in labels)) + 8
    legend_width = sum(14 + CHAR_WIDTH * len(name) + LEGEND_GAP for name in legend)
    width = int(label_width + max(BAR_AREA + VALUE_WIDTH, legend_width))
    bar_height = BAR_ALONE if len(series) == 1 else BAR_BESIDE
    row_height = bar_height * len(series) + ROW_GAP
    legend_y = 24 + row_height * len(groups) + 10
    height = legend_y + 8
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="0" y="12">{escape(title)}</text>',
        f'<line class="axis" x1="{label_width}" y1="18" x2="{label_width}" y2="{20 + row_height * len(groups)}"/>',
    ]
    for number, (group, label) in enumerate(zip(groups, labels, strict=True)):
        y = 20 + row_height * number
        parts.append(f'<text class="label" x="0" y="{y + row_height / 2 + 4:.1f}">{escape(label)}</text>')
        for index, value in enumerate(group.values):
            if value is None:
                continue
            bar_width = max(1.0, BAR_AREA * value / top)
            bar_y = y + ROW_GAP / 2 + index * bar_height
            css = f"bar c{colour[group.key] if group.key is not None else index % COLOURS}"
            what = f"{series[index]}{f' ({group.key})' if group.key is not None else ''}"
            parts.append(
                f'<rect class="{css}" x="{label_width}" y="{bar_y:.1f}" width="{bar_width:.1f}" '
                f'height="{bar_height:.1f}"><title>{escape(group.label)}: {escape(what)} {_number(value)}'
                f"{escape(unit)}</title></rect>"
                f'<text x="{label_width + bar_width + 4:.1f}" y="{bar_y + bar_height - 2:.1f}">{_number(value)}'
                f"{escape(unit)}</text>"
            )
    parts.append(f'<g class="legend" transform="translate({label_width:.0f},{legend_y - 9})">')
    x = 0.0
    for index, name in enumerate(legend):
        css = f"bar c{colour[name] if name in colour else index % COLOURS}"
        parts.append(
            f'<rect class="{css}" x="{x:.0f}" y="0" width="10" height="10"/>'
            f'<text x="{x + 14:.0f}" y="9">{escape(name)}</text>'
        )
        x += 14 + CHAR_WIDTH * len(name) + LEGEND_GAP
    parts.append("</g></svg>")
    return "".join(parts)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def _short(label: str, length: int = 22) -> str:
    """``label``, or its start and its end around an ellipsis: two labels that differ at the end still do."""
    if len(label) <= length:
        return label
    tail = (length - 1) // 2
    return label[: length - 1 - tail] + "…" + label[-tail:]


#: A plan node's box in the graph: width, height, and the gaps between layers and between boxes of a layer.
NODE_WIDTH, NODE_HEIGHT, LAYER_GAP, NODE_GAP = 230, 58, 40, 14


def plan_graph(nodes: Sequence[dict[str, Any]]) -> str:
    """A compiled plan's nodes (EXPLAIN's structured result) as a graph, sources on the left: each node's type and
    implementation, its description and each state's TTL; '' without nodes."""
    if not nodes:
        return ""
    layer: dict[Any, int] = {}
    for node in nodes:  # a plan lists each node after its inputs
        layer[node["id"]] = 1 + max((layer.get(input_id, 0) for input_id in node.get("inputs", [])), default=-1)
    rows: dict[int, int] = {}
    where: dict[Any, tuple[float, float]] = {}
    for node in nodes:
        column, row = layer[node["id"]], rows.get(layer[node["id"]], 0)
        rows[column] = row + 1
        where[node["id"]] = (column * (NODE_WIDTH + LAYER_GAP), row * (NODE_HEIGHT + NODE_GAP))
    width = (max(layer.values()) + 1) * (NODE_WIDTH + LAYER_GAP)
    height = max(rows.values()) * (NODE_HEIGHT + NODE_GAP)
    parts = [
        f'<svg class="chart plan" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'xmlns="http://www.w3.org/2000/svg"><title>the compiled plan</title>'
    ]
    for node in nodes:
        x, y = where[node["id"]]
        for input_id in node.get("inputs", []):
            if input_id in where:
                from_x, from_y = where[input_id]
                parts.append(
                    f'<line class="edge" x1="{from_x + NODE_WIDTH}" y1="{from_y + NODE_HEIGHT / 2}" '
                    f'x2="{x}" y2="{y + NODE_HEIGHT / 2}"/>'
                )
    for node in nodes:
        x, y = where[node["id"]]
        states = node.get("state") or []
        ttls = ", ".join(f"{state.get('name')} TTL {_duration(state.get('ttl_ms'))}" for state in states)
        label = f"{node['id']}: " + str(node.get("type", "")).removeprefix("stream-exec-")
        if node.get("implementation"):
            label += f" on {node['implementation']}"
        parts.append(
            f'<g class="node{" stateful" if states else ""}"><rect x="{x}" y="{y}" width="{NODE_WIDTH}" '
            f'height="{NODE_HEIGHT}" rx="4"/><title>{escape(str(node.get("description", "")))}</title>'
            f'<text x="{x + 6}" y="{y + 15}">{escape(label)}</text>'
            f'<text x="{x + 6}" y="{y + 31}">{escape(_short(str(node.get("description", "")), 36))}</text>'
            f'<text class="ttl" x="{x + 6}" y="{y + 47}">{escape(_short(ttls, 38))}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _duration(milliseconds: Any) -> str:
    """A TTL as people write it: 0 (kept forever), else in the largest whole unit."""
    if not milliseconds:
        return "none (kept forever)"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if milliseconds % size == 0:
            return f"{milliseconds // size} {unit}"
    return f"{milliseconds} ms"
