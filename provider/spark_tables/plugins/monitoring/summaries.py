"""What the monitoring pages show, read from the XComs this provider's tasks leave: plain data in, plain data out.

A task's ``return_value`` says what its Spark job did (``SparkJobOperator.xcom_value``: the job's output, its
application and timings, and ``caches`` when it used cached tables); a failed try leaves the same shape under
``FAILED_TRY``, with its error and cleanup; a registry XCom (``spark_tables.cache.<name>``) is a live copy of a
cached table; the release and invalidation tasks say which copies they removed, each as it was; a reload sensor
leaves when its table's next reload is due (``RELOAD_DUE``). Nothing here reads Airflow or Spark: the routes hand
these functions the XComs, already checked against the user's access.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor, is_descriptor
from spark_tables.core.cache.table import REGISTRY_KEY_PREFIX
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE

#: The XCom key of a task's result.
RETURN_VALUE = "return_value"
#: A cached table copy's states, as the run tab shows them.
LIVE, INVALIDATED, EVICTED, RELEASED = "live", "invalidated", "evicted", "released"
#: What the run tab shows of each CTAS table, with its default; an earlier try's leftovers that a job undid come
#: as rows with ``undone_before`` only.
CTAS_FIELDS: dict[str, Any] = {
    "table": None,
    "created": None,
    "replaced": False,
    "reused_from_try": None,
    "skipped": None,
    "dropped_later": False,
    "rows": None,
    "bytes": None,
    "location": None,
    "undone": None,
    "undone_before": None,
}
#: The keys of a job's output that say where and how long it ran.
JOB_KEYS = ("application_id", "application_url", "master", "spark_version", "session_seconds", "work_seconds")
#: The keys a failed try's report adds to the job's output.
FAILURE_KEYS = ("try_number", "error", "cleanup")


@dataclass(frozen=True)
class XComEntry:
    """One XCom of a DAG run, its value as stored (JSON)."""

    task_id: str
    map_index: int
    key: str
    value: Any


def run_summary(entries: Iterable[XComEntry]) -> dict[str, Any]:
    """A DAG run's cached tables, CTAS tables and lookup joins, from its XComs."""
    entries = list(entries)
    results = [entry for entry in entries if entry.key in (RETURN_VALUE, FAILED_TRY) and isinstance(entry.value, dict)]
    return {
        "caches": cached_tables(entries),
        "ctas": [table for entry in results for table in ctas_tables(entry)],
        "lookups": [lookup for entry in results if (lookup := lookup_join(entry)) is not None],
        "jobs": [
            {"task_id": entry.task_id, "map_index": entry.map_index, **job_of(entry.value), **failure_of(entry)}
            for entry in results
            if "application_id" in entry.value or entry.key == FAILED_TRY
        ],
    }


def task_summary(entries: Iterable[XComEntry]) -> dict[str, Any]:
    """One task instance's Spark job, CTAS steps, cache uses and lookup metrics, from its XComs."""
    entries = list(entries)
    ranked = [e for e in entries if e.key == RETURN_VALUE and isinstance(e.value, dict)]
    ranked += [e for e in entries if e.key == FAILED_TRY] + [e for e in entries if e.key == RETURN_VALUE]
    result = next(iter(ranked), None)  # a result, else a failed try's report, else what the task returned
    if result is None or not isinstance(result.value, dict):
        return {
            "job": None,
            "failure": None,
            "output": None if result is None else result.value,
            "ctas": [],
            "caches": [],
            "lookup": None,
        }
    hidden = (*JOB_KEYS, *FAILURE_KEYS, "caches")
    return {
        "job": job_of(result.value) if "application_id" in result.value else None,
        "failure": failure_of(result).get("failure"),
        "output": {key: value for key, value in result.value.items() if key not in hidden},
        "ctas": ctas_tables(result),
        "caches": [{"name": name, **use} for name, use in sorted((result.value.get("caches") or {}).items())],
        "lookup": lookup_join(result),
    }


def job_of(value: dict[str, Any]) -> dict[str, Any]:
    return {key: value.get(key) for key in JOB_KEYS}


def failure_of(entry: XComEntry) -> dict[str, Any]:
    """A failed try's number, error and cleanup (``{"failure": ...}``); ``{}`` for a task's result."""
    if entry.key != FAILED_TRY:
        return {}
    return {"failure": {key: entry.value.get(key) for key in FAILURE_KEYS}}


def cached_tables(entries: list[XComEntry]) -> list[dict[str, Any]]:
    """Each cached table of the run: its copies (location, the task that wrote it, rows, bytes, partitions,
    state) and, per task that used it, hits, misses and fallbacks."""
    tables: dict[str, dict[str, Any]] = {}

    def table(name: str) -> dict[str, Any]:
        return tables.setdefault(
            name, {"name": name, "fingerprint": None, "definition": None, "copies": {}, "uses": []}
        )

    def copy(name: str, location: str) -> dict[str, Any]:
        return table(name)["copies"].setdefault(
            location,
            {
                "location": location,
                "written_by": None,
                "rows": None,
                "bytes": None,
                "partitions": None,
                "written_at": None,
                "state": LIVE,
            },
        )

    removed: list[tuple[str, str, str]] = []  # (name, location, state)
    evicted: set[str] = set()
    for entry in entries:
        value = entry.value
        if entry.key.startswith(REGISTRY_KEY_PREFIX) and is_descriptor(value):
            descriptor = CacheDescriptor.from_dict(value)
            table(descriptor.name)["fingerprint"] = descriptor.fingerprint
            copy(descriptor.name, descriptor.location).update(
                written_by=entry.task_id,
                rows=descriptor.rows,
                bytes=descriptor.bytes,
                partitions=len(descriptor.partitions),
                written_at=descriptor.written_at,
            )
            continue
        if entry.key != RETURN_VALUE or not isinstance(value, dict):
            continue
        for name, use in (value.get("caches") or {}).items():
            table(name)["uses"].append({"task_id": entry.task_id, "map_index": entry.map_index, **use})
            if use.get("definition"):
                table(name).update(definition=use["definition"], fingerprint=use.get("fingerprint"))
            if use.get("location"):
                written = copy(name, use["location"])
                if use.get("bytes_written") and written["written_by"] is None:
                    written["written_by"] = entry.task_id
        evicted.update(value.get("cache_evictions") or [])
        for state, key in ((RELEASED, "released"), (INVALIDATED, "invalidated")):
            for name, locations in (value.get(key) or {}).items():
                removed += [(name, location, state) for location in locations]
        for was in value.get("removed_copies") or []:  # its registry entry went with it: the copy as it was
            known = copy(was["name"], was["location"])
            for field in ("written_by", "rows", "bytes", "partitions", "written_at"):
                if known[field] is None:
                    known[field] = was.get(field)
    for name, location, state in removed:
        copy(name, location)["state"] = state
    for name_table in tables.values():
        for location, entry_copy in name_table["copies"].items():
            if location in evicted and entry_copy["state"] == LIVE:
                entry_copy["state"] = EVICTED
        name_table["copies"] = list(name_table["copies"].values())
        name_table["hits"] = sum(use.get("hits", 0) for use in name_table["uses"])
        name_table["misses"] = sum(use.get("misses", 0) for use in name_table["uses"])
        name_table["fallbacks"] = sum(use.get("fallbacks", 0) for use in name_table["uses"])
    return sorted(tables.values(), key=lambda t: t["name"])


def ctas_tables(entry: XComEntry) -> list[dict[str, Any]]:
    """The CTAS tables a task's job made or undid, each with its ``steps``: a CTAS task's one table, or a SQL job's
    CTAS statements; in a failed try's report, with the error and what was undone after it."""
    value = entry.value
    is_ctas = "table" in value and ("created" in value or "cleaned_up" in value)
    made = [value] if is_ctas else list(value.get("ctas") or [])
    failure = failure_of(entry).get("failure")
    tables = [{field: table.get(field, default) for field, default in CTAS_FIELDS.items()} for table in made]
    rows = [{**table, "steps": ctas_steps(table, failure)} for table in tables]
    if not is_ctas:  # a SQL job's: before its statements, not one table's
        rows += [
            {**CTAS_FIELDS, "undone_before": step, "steps": [f"an earlier try's leftovers dropped: {step}"]}
            for step in value.get("undone_before") or []
        ]
    return [{"task_id": entry.task_id, **row} for row in rows]


def ctas_steps(table: dict[str, Any], failure: dict[str, Any] | None = None) -> list[str]:
    """A CTAS table's lifecycle in one try, step by step, as people read it."""
    steps = [f"an earlier try's leftovers dropped: {step}" for step in table.get("undone_before") or []]
    if table["reused_from_try"]:
        steps.append(f"reused: try {table['reused_from_try']} had completed it")
    elif table["skipped"]:
        steps.append(f"not run: {table['skipped']}")
    elif table["created"]:
        steps.append("created, replacing the table before" if table["replaced"] else "created")
        complete = ", ".join(f"{table[k]:,} {k}" for k in ("rows", "bytes") if table[k] is not None)
        steps.append(f"complete{': ' + complete if complete else ''}")
        if table["dropped_later"]:
            steps.append("dropped later by the same job")
    if failure is None:
        return steps
    steps.append(f"try {failure['try_number']} failed: {failure['error']}")
    if table["undone"] is not None:
        steps += [f"undone by the job: {step}" for step in table["undone"]] or ["undone by the job: nothing was left"]
    elif failure["cleanup"] is not None:
        steps += [f"undone by the cleanup job: {step}" for step in failure["cleanup"]] or [
            "cleanup job: nothing was left"
        ]
    else:
        steps.append("not cleaned up yet: the next try, the failure callback or the next CTAS on this catalog will")
    return steps


def lookup_join(entry: XComEntry) -> dict[str, Any] | None:
    """A lookup join's or reload's table, cache mode and metrics; None for any other task."""
    value = entry.value
    if "lookup" not in value or "metrics" not in value:
        return None
    if "loads" in value:  # a reload (a FULL join names the snapshot it read too)
        return {
            "task_id": entry.task_id,
            "kind": "reload",
            "lookup": value["lookup"],
            "snapshot": value["snapshot"],
            "loaded": value.get("loaded"),
            "load_failures": value.get("load_failures"),
            "metrics": value["metrics"],
        }
    return {
        "task_id": entry.task_id,
        "kind": "join",
        "lookup": value["lookup"],
        "cache": value.get("cache"),
        "rows": value.get("rows"),
        "metrics": value["metrics"],
    }


@dataclass(frozen=True)
class RecentResult:
    """A task's result in a recent run of a DAG the user may read; ``at`` is when it was stored (ISO 8601)."""

    dag_id: str
    run_id: str
    at: str
    entry: XComEntry


def overview(results: Iterable[RecentResult]) -> dict[str, Any]:
    """Across recent runs, oldest first: each lookup table's reloads and joins and its next reload due, each cached
    table's reads against its recomputes, the CTAS tables that jobs undid (an earlier try's leftovers) and the
    tries that failed."""
    lookups: dict[str, dict[str, Any]] = {}
    caches: dict[str, dict[str, Any]] = {}
    undone: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []

    def lookup_table(name: str) -> dict[str, Any]:
        return lookups.setdefault(
            name,
            {"name": name, "modes": [], "reloads": [], "joins": [], "last_reload": None, "next_reload": None},
        )

    for result in results:
        value = result.entry.value
        if not isinstance(value, dict):
            continue
        where = {"dag_id": result.dag_id, "run_id": result.run_id, "task_id": result.entry.task_id, "at": result.at}
        if result.entry.key == RELOAD_DUE:
            lookup_table(value["lookup"])["next_reload"] = {**where, "due": value["due"], "failing": value["failing"]}
            continue
        if result.entry.key == FAILED_TRY:
            failure = failure_of(result.entry)["failure"]
            failed.append({**where, **failure})
            undone += [
                {**where, "undone": step} for step in [*(value.get("undone") or []), *(failure["cleanup"] or [])]
            ]
        lookup = lookup_join(result.entry)
        if lookup is not None:
            table = lookup_table(lookup["lookup"])
            if lookup["kind"] == "reload":
                reload = {
                    **where,
                    "snapshot": lookup["snapshot"],
                    "loaded": lookup["loaded"],
                    "load_failures": lookup["load_failures"],
                }
                table["reloads"].append(reload)
                table["last_reload"] = reload
            else:
                metrics = lookup["metrics"]
                table["joins"].append(
                    {
                        **where,
                        "cache": lookup["cache"],
                        "rows": lookup["rows"],
                        "hit_rate": metrics.get("hitRate"),
                        "load_ms": metrics.get("latestLoadTime"),
                    }
                )
                if lookup["cache"] not in table["modes"]:
                    table["modes"].append(lookup["cache"])
        for name, use in (value.get("caches") or {}).items():
            table = caches.setdefault(name, {"name": name, "reads": [], "recomputes": []})
            kind = "recomputes" if use.get("status") == "miss" else "reads"
            table[kind].append({**where, "seconds": use.get("seconds"), "status": use.get("status")})
        undone += [{**where, "undone": step} for step in value.get("undone_before") or []]
        undone += [{**where, "undone": step} for step in value.get("swept") or []]
    for table in lookups.values():  # a due time the reload has met since is no longer the next one
        due, last = table["next_reload"], table["last_reload"]
        if due is not None:
            due["reloaded_since"] = last is not None and last["at"] > due["at"]
    for table in caches.values():
        table["mean_read_seconds"] = _mean(use["seconds"] for use in table["reads"])
        table["mean_recompute_seconds"] = _mean(use["seconds"] for use in table["recomputes"])
    return {
        "lookups": sorted(lookups.values(), key=lambda t: t["name"]),
        "caches": sorted(caches.values(), key=lambda t: t["name"]),
        "ctas_undone": undone[::-1],
        "failed_tries": failed[::-1],
    }


def cache_storage(
    copies: Iterable[tuple[str, int]], runs: Iterable[tuple[str, str, str]], quota: int | None, readable: set[str]
) -> dict[str, Any]:
    """The cache root's use against ``[spark_tables] cache_quota``: bytes in all, and by run for the DAGs the user
    may read; the other DAGs' copies only as one sum. ``copies`` are (location, bytes), ``runs`` (dag_id, run_id,
    run folder) as the cache storage lists them."""
    copies = list(copies)
    used = sum(size for _, size in copies)
    shown = []
    for dag_id, run_id, folder in sorted(runs):
        if dag_id not in readable:
            continue
        inside = [size for location, size in copies if location.startswith(folder.rstrip("/") + "/")]
        shown.append({"dag_id": dag_id, "run_id": run_id, "copies": len(inside), "bytes": sum(inside)})
    return {
        "quota": quota,
        "used": used,
        "share": used / quota if quota else None,
        "runs": shown,
        "other_bytes": used - sum(run["bytes"] for run in shown),
    }


def _mean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None
