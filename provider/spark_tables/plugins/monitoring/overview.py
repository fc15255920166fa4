"""The monitoring overview across recent runs of the DAGs a user may read: lookup tables' reloads and joins,
cached tables' reads against recomputes, the CTAS tables jobs undid and the tries whose reports say they failed.
A reload sensor leaves when its table's next reload is due (``RELOAD_DUE``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_tables.core.cache.table import MEMORY
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE
from spark_tables.plugins.monitoring.entries import RETURN_VALUE, XComEntry
from spark_tables.plugins.monitoring.summaries import failure_of, kind_summary


@dataclass(frozen=True)
class RecentResult:
    """A task's result in a recent run of a DAG the user may read; ``at`` is when it was stored (ISO 8601)."""

    dag_id: str
    run_id: str
    at: str
    entry: XComEntry


def overview(results: Iterable[RecentResult]) -> dict[str, Any]:
    """Across recent runs, oldest first: each lookup table's reloads and joins and its next reload due, each cached
    table's reads against its recomputes, both by DAG and definition (two DAGs' tables of one name are two), the
    CTAS tables that jobs undid (an earlier try's leftovers) and the tries whose reports say they failed (the
    overview route adds the tries Airflow knows failed: ``failed_tries``)."""
    lookup_items: list[tuple[str, str, str | None, str, dict[str, Any]]] = []  # dag, name, definition, kind, item
    cache_items: list[tuple[str, str, str | None, str | None, str, dict[str, Any]]] = []
    undone: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for result in results:
        value = result.entry.value
        if not isinstance(value, dict):
            continue
        where = {"dag_id": result.dag_id, "run_id": result.run_id, "task_id": result.entry.task_id, "at": result.at}
        if result.entry.key == RELOAD_DUE:
            due = {
                **where,
                "due": value["due"],
                "failing": value["failing"],
                "table_version": value.get("table_version"),
            }
            lookup_items.append((result.dag_id, value["lookup"], None, "due", due))
            continue
        summary = kind_summary(result.entry)
        if result.entry.key == FAILED_TRY:
            failure = failure_of(result.entry)["failure"]
            failed.append({**where, "map_index": result.entry.map_index, **failure})
            undone += [{**where, "undone": step} for step in [*summary.get("undone", []), *(failure["cleanup"] or [])]]
        lookup = summary.get("lookup")  # the kind summary above has it: no second read of the entry
        if lookup is not None:
            if lookup["kind"] == "reload":
                item = {
                    **where,
                    "snapshot": lookup["snapshot"],
                    "loaded": lookup["loaded"],
                    "unchanged": lookup["unchanged"],
                    "table_version": lookup["table_version"],
                    "load_failures": lookup["load_failures"],
                }
            else:
                metrics = lookup["metrics"] or {}
                item = {
                    **where,
                    "cache": lookup["cache"],
                    "rows": lookup["rows"],
                    "hit_rate": metrics.get("hitRate"),
                    "load_ms": metrics.get("latestLoadTime"),
                }
            lookup_items.append((result.dag_id, lookup["lookup"], lookup.get("definition"), lookup["kind"], item))
        if result.entry.key == RETURN_VALUE:
            for name, use in (value.get("caches") or {}).items():
                kind = "reads" if use.get("status") == "hit" else "recomputes"  # a fallback computes it again
                item = {**where, "seconds": use.get("seconds"), "status": use.get("status")}
                item["from"] = use.get("read_from")  # a hit's copy: on files, or in a server's memory
                cache_items.append((result.dag_id, name, use.get("fingerprint"), use.get("definition"), kind, item))
        undone += [{**where, "undone": step} for step in summary.get("undone_before", [])]
    return {
        "lookups": _lookup_tables(lookup_items),
        "caches": _cached_tables(cache_items),
        "ctas_undone": undone[::-1],
        "failed_tries": failed[::-1],
    }


def _definitions(keys: Iterable[tuple[str, str, str | None]]) -> dict[tuple[str, str], set[str]]:
    """The definitions each (DAG, name) was seen with."""
    known: dict[tuple[str, str], set[str]] = {}
    for dag_id, name, definition in keys:
        if definition is not None:
            known.setdefault((dag_id, name), set()).add(definition)
    return known


def _of(known: dict[tuple[str, str], set[str]], dag_id: str, name: str, definition: str | None) -> str | None:
    """An item's definition: its own, else the one its DAG's table of that name has (if just one), else None."""
    if definition is not None:
        return definition
    seen = known.get((dag_id, name), set())
    return next(iter(seen)) if len(seen) == 1 else None


def _lookup_tables(items: list[tuple[str, str, str | None, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each lookup table by DAG and definition (its source table, connection and key): its cache modes, reloads,
    joins and next reload due (a reload sensor's, given to every table of its DAG of that name)."""
    known = _definitions((dag_id, name, definition) for dag_id, name, definition, _, _ in items)
    tables: dict[tuple[str, str, str | None], dict[str, Any]] = {}

    def lookup_table(dag_id: str, name: str, definition: str | None) -> dict[str, Any]:
        return tables.setdefault(
            (dag_id, name, definition),
            {
                "dag_id": dag_id,
                "name": name,
                "definition": definition,
                "modes": [],
                "reloads": [],
                "joins": [],
                "last_reload": None,
                "next_reload": None,
            },
        )

    for dag_id, name, definition, kind, item in items:
        if kind == "due":
            for seen in sorted(known.get((dag_id, name), set())) or [None]:
                lookup_table(dag_id, name, seen)["next_reload"] = dict(item)
            continue
        table = lookup_table(dag_id, name, _of(known, dag_id, name, definition))
        if kind == "reload":
            table["reloads"].append(item)
            table["last_reload"] = item
        else:
            table["joins"].append(item)
            if item["cache"] not in table["modes"]:
                table["modes"].append(item["cache"])
    for table in tables.values():  # a due time the reload has met since is no longer the next one
        due, last = table["next_reload"], table["last_reload"]
        if due is not None:
            due["reloaded_since"] = last is not None and last["at"] > due["at"]
    return sorted(tables.values(), key=lambda t: (t["dag_id"], t["name"], t["definition"] or ""))


def _cached_tables(items: list[tuple[str, str, str | None, str | None, str, dict[str, Any]]]) -> list[dict]:
    """Each cached table by DAG and definition (its fingerprint): its reads, of a copy on files and of one in a
    server's memory apart, against its recomputes."""
    known = _definitions((dag_id, name, fingerprint) for dag_id, name, fingerprint, _, _, _ in items)
    tables: dict[tuple[str, str, str | None], dict[str, Any]] = {}
    for dag_id, name, fingerprint, definition, kind, item in items:
        fingerprint = _of(known, dag_id, name, fingerprint)
        empty = {"dag_id": dag_id, "name": name, "fingerprint": fingerprint, "definition": None}
        table = tables.setdefault((dag_id, name, fingerprint), {**empty, "reads": [], "recomputes": []})
        table["definition"] = definition or table["definition"]
        table[kind].append(item)
    for table in tables.values():  # reads of a copy on files and of one in a server's memory, apart
        table["file_reads"] = [use for use in table["reads"] if use["from"] != MEMORY]
        table["memory_reads"] = [use for use in table["reads"] if use["from"] == MEMORY]
        table["mean_file_read_seconds"] = _mean(use["seconds"] for use in table["file_reads"])
        table["mean_memory_read_seconds"] = _mean(use["seconds"] for use in table["memory_reads"])
        table["mean_recompute_seconds"] = _mean(use["seconds"] for use in table["recomputes"])
    return sorted(tables.values(), key=lambda t: (t["dag_id"], t["name"], t["fingerprint"] or ""))


def _mean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None
