"""What the monitoring pages show, read from the XComs this provider's tasks leave: plain data in, plain data out.

A task's ``return_value`` says what its Spark job did (``SparkJobOperator.xcom_value``: the job's typed output with
its ``kind`` and ``version``, its application and timings, and ``caches`` when it used cached tables); a failed try
leaves the same shape under ``FAILED_TRY``, with its error and cleanup. What a page shows of a job's own output is
its kind's summary, kept with its capability (``KIND_SUMMARIES``), chosen by the kind the XCom names. A registry
XCom (``spark_tables.cache.<name>``) is a live copy of a cached table; the release and invalidation tasks say which
copies they removed, each as it was; a reload sensor leaves when its table's next reload is due (``RELOAD_DUE``).
Nothing here reads Airflow or Spark: the routes hand these functions the XComs, already checked against the user's
access.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor, is_descriptor
from spark_tables.core.cache.table import REGISTRY_KEY_PREFIX
from spark_tables.core.ctas.monitoring import ctas_summary
from spark_tables.core.job_result import RESULT_KINDS, RESULT_VERSION
from spark_tables.core.lookup.monitoring import lookup_join_summary, lookup_reload_summary
from spark_tables.core.sql.monitoring import sql_summary
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE

#: The XCom key of a task's result.
RETURN_VALUE = "return_value"
#: A cached table copy's states, as the run tab shows them.
LIVE, INVALIDATED, EVICTED, RELEASED = "live", "invalidated", "evicted", "released"
#: The keys of a job's output that say where and how long it ran.
JOB_KEYS = ("application_id", "application_url", "master", "spark_version", "session_seconds", "work_seconds")
#: The keys a failed try's report adds to the job's output.
FAILURE_KEYS = ("try_number", "error", "cleanup")
#: The keys that name a job result's kind and version.
RESULT_KEYS = ("kind", "version")


def _no_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    """A kind whose pages show its job line and output only."""
    return {}


#: What the pages show of each job kind's output (its CTAS tables, lookup, what it undid before its work), by kind:
#: each kind's summary, kept with its capability, given the XCom's value and a failed try's failure; a test holds
#: this in step with the result kinds.
KIND_SUMMARIES: dict[str, Callable[[dict[str, Any], dict[str, Any] | None], dict[str, Any]]] = {
    "sql": sql_summary,
    "ctas": ctas_summary,
    "ctas_cleanup": _no_summary,
    "lookup_join": lookup_join_summary,
    "lookup_reload": lookup_reload_summary,
    "plan": _no_summary,
    "streaming_aggregation": _no_summary,
}


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
            if is_job_result(entry.value) or entry.key == FAILED_TRY
        ],
    }


def task_summary(entries: Iterable[XComEntry]) -> dict[str, Any]:
    """One task instance's job kind, Spark job, CTAS steps, cache uses and lookup metrics, from its XComs."""
    entries = list(entries)
    ranked = [e for e in entries if e.key == RETURN_VALUE and isinstance(e.value, dict)]
    ranked += [e for e in entries if e.key == FAILED_TRY] + [e for e in entries if e.key == RETURN_VALUE]
    result = next(iter(ranked), None)  # a result, else a failed try's report, else what the task returned
    if result is None or not isinstance(result.value, dict):
        return {
            "kind": None,
            "job": None,
            "failure": None,
            "output": None if result is None else result.value,
            "ctas": [],
            "caches": [],
            "lookup": None,
        }
    hidden = (*JOB_KEYS, *FAILURE_KEYS, *RESULT_KEYS, "caches")
    return {
        "kind": result_kind(result.value),
        "job": job_of(result.value) if is_job_result(result.value) else None,
        "failure": failure_of(result).get("failure"),
        "output": {key: value for key, value in result.value.items() if key not in hidden},
        "ctas": ctas_tables(result),
        "caches": [{"name": name, **use} for name, use in sorted((result.value.get("caches") or {}).items())],
        "lookup": lookup_join(result),
    }


def job_of(value: dict[str, Any]) -> dict[str, Any]:
    return {key: value.get(key) for key in JOB_KEYS}


def is_job_result(value: Any) -> bool:
    """Whether ``value`` is a job's result (or a failed try's report that has one): it names its kind and version,
    or, written by an earlier release, where its job ran."""
    return isinstance(value, dict) and (_kind_named(value) is not None or "application_id" in value)


def result_kind(value: Any) -> str | None:
    """The kind of job whose output ``value`` holds, as it names it; for a result of an earlier release, which does
    not, the kind its keys tell; None for a value that is no job's."""
    if not isinstance(value, dict):
        return None
    return _kind_named(value) or _legacy_kind(value)


def _kind_named(value: dict[str, Any]) -> str | None:
    if value.get("version") == RESULT_VERSION and value.get("kind") in RESULT_KINDS:
        return value["kind"]
    return None


def _legacy_kind(value: dict[str, Any]) -> str | None:
    """The kind of an output written before outputs named theirs, from the keys its kind always wrote: the only
    place a kind is told by keys, so that the pages of earlier runs still render. A value no other kind's keys
    tell, with ``application_id`` or ``undone``, was a ``sql`` job's (or a failed try's that had no output)."""
    if "table" in value and ("created" in value or "cleaned_up" in value):
        return "ctas"
    if "lookup" in value and "metrics" in value:
        return "lookup_reload" if "loads" in value else "lookup_join"
    if "action" in value and "plan_uri" in value:
        return "plan"
    if "query" in value:
        return "streaming_aggregation"
    if any(key in value for key in ("application_id", "ctas", "undone", "undone_before", "swept")):
        return "sql"
    return None


def kind_summary(entry: XComEntry) -> dict[str, Any]:
    """What the pages show of the job's output in a task's result or a failed try's report: its kind's summary
    (``ctas``, ``lookup``, ``undone_before``, ``undone``); empty for a value that is no job's."""
    kind = result_kind(entry.value)
    if kind is None:
        return {}
    return KIND_SUMMARIES[kind](entry.value, failure_of(entry).get("failure"))


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
    return [{"task_id": entry.task_id, **row} for row in kind_summary(entry).get("ctas", [])]


def lookup_join(entry: XComEntry) -> dict[str, Any] | None:
    """A lookup join's or reload's table, cache mode and metrics; None for any other task."""
    lookup = kind_summary(entry).get("lookup")
    return None if lookup is None else {"task_id": entry.task_id, **lookup}


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
        summary = kind_summary(result.entry)
        if result.entry.key == FAILED_TRY:
            failure = failure_of(result.entry)["failure"]
            failed.append({**where, **failure})
            undone += [{**where, "undone": step} for step in [*summary.get("undone", []), *(failure["cleanup"] or [])]]
        lookup = summary.get("lookup")  # the kind summary above has it: no second read of the entry
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
        undone += [{**where, "undone": step} for step in summary.get("undone_before", [])]
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
