"""What the monitoring pages show of a lookup join or reload: its table, cache mode, snapshot (and the version of the
table it holds) and FLIP-221's metrics (per key, also each executor Python worker's), from its output as its XCom
holds it (``core.lookup.result``), and the table's definition the operator adds (``lookup_definition``; None in
results of earlier releases)."""

from __future__ import annotations

from typing import Any


def lookup_join_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    lookup = {"kind": "join", "lookup": value.get("lookup"), "cache": value.get("cache"), "rows": value.get("rows")}
    return {
        "lookup": {
            **lookup,
            "metrics": value.get("metrics"),
            "worker_metrics": value.get("worker_metrics") or [],
            "definition": value.get("lookup_definition"),
            "snapshot": value.get("snapshot"),
            "table_version": _number(value.get("table_version")),
        }
    }


def lookup_reload_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    snapshot = value.get("snapshot")
    return {
        "lookup": {
            "kind": "reload",
            "lookup": value.get("lookup"),
            "snapshot": snapshot,
            "loaded": value.get("loaded"),
            "unchanged": bool(value.get("unchanged")),
            "load_failures": value.get("load_failures"),
            "metrics": value.get("metrics"),
            "definition": value.get("lookup_definition"),
            "table_version": _number((snapshot or {}).get("table_version")),
        }
    }


def _number(version: Any) -> int | None:
    """A table version's number (``TableVersion``'s fields), None for a table without versions."""
    return version.get("number") if isinstance(version, dict) else None
