"""Bar charts drawn as inline SVG on the server: no script and no asset from elsewhere, so a page works offline."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

#: One bar group: its label and one value per series (None: no value).
Group = tuple[str, Sequence[float | None]]

WIDTH, BAR_AREA, LABEL_WIDTH, ROW = 520, 300, 150, 18


def bar_chart(title: str, groups: Sequence[Group], series: Sequence[str], unit: str = "") -> str:
    """Horizontal bars, a row per group and a bar per series, scaled to the largest value; '' without values."""
    values = [value for _, row in groups for value in row if value is not None]
    if not values:
        return ""
    top = max(values) or 1.0
    bar_height = (ROW - 4) / max(1, len(series))
    height = 24 + ROW * len(groups) + (16 if len(series) > 1 else 0)
    parts = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
        f'<text x="0" y="12">{escape(title)}</text>',
        f'<line class="axis" x1="{LABEL_WIDTH}" y1="18" x2="{LABEL_WIDTH}" y2="{20 + ROW * len(groups)}"/>',
    ]
    for number, (label, row) in enumerate(groups):
        y = 20 + ROW * number
        parts.append(f'<text x="0" y="{y + ROW - 6}">{escape(_short(label))}</text>')
        for index, value in enumerate(row):
            if value is None:
                continue
            width = max(1.0, BAR_AREA * value / top)
            bar_y = y + 2 + index * bar_height
            css = "bar second" if index else "bar"
            parts.append(
                f'<rect class="{css}" x="{LABEL_WIDTH}" y="{bar_y:.1f}" width="{width:.1f}" height="{bar_height:.1f}">'
                f"<title>{escape(label)}: {escape(series[index])} {_number(value)}{escape(unit)}</title></rect>"
                f'<text x="{LABEL_WIDTH + width + 4:.1f}" y="{bar_y + bar_height - 3:.1f}">{_number(value)}'
                f"{escape(unit)}</text>"
            )
    if len(series) > 1:
        legend_y = height - 4
        parts.append(
            f'<text x="{LABEL_WIDTH}" y="{legend_y}">'
            + escape("  ".join(f"{['■', '▲'][i % 2]} {name}" for i, name in enumerate(series)))
            + "</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")


def _short(label: str, length: int = 22) -> str:
    return label if len(label) <= length else label[: length - 1] + "…"


#: A plan node's box in the graph: width, height, and the gaps between layers and between boxes of a layer.
NODE_WIDTH, NODE_HEIGHT, LAYER_GAP, NODE_GAP = 230, 58, 40, 14


def plan_graph(nodes: Sequence[dict[str, Any]]) -> str:
    """A compiled plan's nodes (EXPLAIN's structured result) as a graph, sources on the left: each node's type, its
    description and each state's TTL; '' without nodes."""
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
