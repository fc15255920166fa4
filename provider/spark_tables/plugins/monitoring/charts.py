"""Bar charts drawn as inline SVG on the server: no script and no asset from elsewhere, so a page works offline."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

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
