"""What the monitoring pages show, read from the XComs this provider's tasks leave: plain data in, plain data out.

A task's ``return_value`` says what its Spark job did (``SparkJobOperator.xcom_value``: the job's typed output with
its ``kind`` and ``version``, its application and timings, and ``caches`` when it used cached tables); a failed try
leaves the same shape under ``FAILED_TRY``, with its error and cleanup. What a page shows of a job's own output is
its kind's summary, kept with its capability (``core.kinds``), chosen by the kind the XCom names. A registry
XCom (``spark_tables.cache.<name>``) is a live copy of a cached table; a task that used one says which copy it
wrote and which it removed, the release and invalidation tasks which copies they removed, each as it was; a reload
sensor leaves when its table's next reload is due (``RELOAD_DUE``). The failed tries Airflow records come in as
``FailedTry``, their errors as the structured messages of their logs. Nothing here reads Airflow or Spark: the
routes hand these functions the XComs and task instances, already checked against the user's access.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor, is_descriptor
from spark_tables.core.cache.table import MEMORY, REGISTRY_KEY_PREFIX
from spark_tables.core.job_result import RESULT_VERSION
from spark_tables.core.kinds import kind_of
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE

#: The XCom key of a task's result.
RETURN_VALUE = "return_value"
#: A cached table copy's states, as the run tab shows them.
LIVE, INVALIDATED, EVICTED, RELEASED, REMOVED = "live", "invalidated", "evicted", "released", "removed"
#: The events that end a copy, and the state each leaves it in.
ENDED = {"removed": REMOVED, "invalidated": INVALIDATED, "released": RELEASED}
#: What the run tab shows of each copy besides its location, state and events, where known.
COPY_FIELDS = ("written_by", "rows", "bytes", "partitions", "written_at")
#: The keys of a job's output that say where and how long it ran.
#: ``mode``: ``per-job`` (an application of its own, through spark-submit) or ``session`` (on a Spark Connect server).
JOB_KEYS = ("application_id", "application_url", "master", "mode", "spark_version", "session_seconds", "work_seconds")
#: The keys a failed try's report adds to the job's output.
FAILURE_KEYS = ("try_number", "error", "cleanup")
#: The keys that name a job result's kind and version.
RESULT_KEYS = ("kind", "version")


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
    """Whether ``value`` is a job's result (or a failed try's report that has one): it names its kind and version."""
    return result_kind(value) is not None


def result_kind(value: Any) -> str | None:
    """The kind of job whose output ``value`` holds, as it names it; None for a value that is no job's (or of
    another release)."""
    if isinstance(value, dict) and value.get("version") == RESULT_VERSION and kind_of(value.get("kind")) is not None:
        return value["kind"]
    return None


def kind_summary(entry: XComEntry) -> dict[str, Any]:
    """What the pages show of the job's output in a task's result or a failed try's report: its kind's summary
    (``ctas``, ``lookup``, ``undone_before``, ``undone``); empty for a value that is no job's."""
    kind = kind_of(result_kind(entry.value))
    if kind is None:
        return {}
    return kind.summary(entry.value, failure_of(entry).get("failure"))


def failure_of(entry: XComEntry) -> dict[str, Any]:
    """A failed try's number, error and cleanup (``{"failure": ...}``); ``{}`` for a task's result."""
    if entry.key != FAILED_TRY:
        return {}
    return {"failure": {key: entry.value.get(key) for key in FAILURE_KEYS}}


def cached_tables(entries: list[XComEntry]) -> list[dict[str, Any]]:
    """Each cached table of the run: its copies (location, the task that wrote it, rows, bytes, partitions, what
    happened to it and the state that follows) and, per task that used it, hits, misses and fallbacks.

    A copy's ``events`` are what the run's tasks say they did with it, in the order their XComs were stored:
    computed (a miss or fallback that wrote it), read (a hit), removed (found damaged, or withdrawn because
    another task registered its copy first), evicted (over the quota), invalidated, released. Its state is the
    last that ended it (removed, invalidated, released), else evicted, else live while its registry entry is
    there; a copy no task says ended and no registry entry names is removed: it is in no registry any more."""
    tables: dict[str, dict[str, Any]] = {}
    registered: set[tuple[str, str]] = set()

    def table(name: str) -> dict[str, Any]:
        return tables.setdefault(
            name, {"name": name, "fingerprint": None, "definition": None, "copies": {}, "uses": []}
        )

    def copy(name: str, location: str) -> dict[str, Any]:
        return table(name)["copies"].setdefault(location, {"location": location, **dict.fromkeys(COPY_FIELDS)})

    def happened(name: str, location: str, event: str, task_id: str, reason: str | None = None) -> None:
        copy(name, location).setdefault("events", []).append({"event": event, "task_id": task_id, "reason": reason})

    def fill(known: dict[str, Any], facts: dict[str, Any]) -> None:
        for field in COPY_FIELDS:
            if known[field] is None and facts.get(field) is not None:
                known[field] = facts[field]

    for entry in entries:
        value = entry.value
        if entry.key.startswith(REGISTRY_KEY_PREFIX) and is_descriptor(value):
            descriptor = CacheDescriptor.from_dict(value)
            table(descriptor.name)["fingerprint"] = descriptor.fingerprint
            registered.add((descriptor.name, descriptor.location))
            fill(
                copy(descriptor.name, descriptor.location),
                {
                    "written_by": entry.task_id,
                    "rows": descriptor.rows,
                    "bytes": descriptor.bytes,
                    "partitions": len(descriptor.partitions),
                    "written_at": descriptor.written_at,
                },
            )
            continue
        if entry.key != RETURN_VALUE or not isinstance(value, dict):
            continue
        for name, use in (value.get("caches") or {}).items():
            table(name)["uses"].append({"task_id": entry.task_id, "map_index": entry.map_index, **use})
            if use.get("definition"):
                table(name).update(definition=use["definition"], fingerprint=use.get("fingerprint"))
            for removed in use.get("copies_removed") or []:  # damaged ones first: before it read or wrote
                if removed["location"] != use.get("location"):
                    happened(name, removed["location"], "removed", entry.task_id, removed.get("reason"))
            location = use.get("location")
            if not location:
                continue
            written = use.get("copy_written")
            if use.get("status") in ("miss", "fallback") and (written or use.get("bytes_written")):
                fill(copy(name, location), {"written_by": entry.task_id, "bytes": use.get("bytes_written")})
                fill(copy(name, location), written or {})
                happened(name, location, "computed", entry.task_id, use["status"])
            elif use.get("status") == "hit":
                happened(name, location, "read", entry.task_id)
            for removed in use.get("copies_removed") or []:  # its own copy, withdrawn
                if removed["location"] == location:
                    happened(name, location, "removed", entry.task_id, removed.get("reason"))
        for location in value.get("cache_evictions") or []:
            for name, known in tables.items():
                if location in known["copies"]:
                    happened(name, location, "evicted", entry.task_id)
        for event in ("released", "invalidated"):  # what a release or an invalidation returns, by cache name
            for name, locations in (value.get(event) or {}).items():
                for location in locations:
                    happened(name, location, event, entry.task_id)
        for was in value.get("removed_copies") or []:  # its registry entry went with it: the copy as it was
            fill(copy(was["name"], was["location"]), was)
    for name, name_table in tables.items():
        for location, known in name_table["copies"].items():
            known.setdefault("events", [])
            known["state"] = copy_state(known["events"], (name, location) in registered)
        name_table["copies"] = list(name_table["copies"].values())
        name_table["hits"] = sum(use.get("hits", 0) for use in name_table["uses"])
        name_table["misses"] = sum(use.get("misses", 0) for use in name_table["uses"])
        name_table["fallbacks"] = sum(use.get("fallbacks", 0) for use in name_table["uses"])
    return sorted(tables.values(), key=lambda t: t["name"])


def copy_state(events: list[dict[str, Any]], registered: bool) -> str:
    """A copy's state, from what happened to it (``cached_tables``) and whether a registry entry names it."""
    ended = [event["event"] for event in events if event["event"] in ENDED]
    if ended:
        return ENDED[ended[-1]]
    if any(event["event"] == "evicted" for event in events):
        return EVICTED
    return LIVE if registered else REMOVED


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
            due = {**where, "due": value["due"], "failing": value["failing"]}
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


@dataclass(frozen=True)
class FailedTry:
    """A failed try of one of this provider's tasks, as Airflow's task instances and their history record it;
    ``at`` is when it ended (ISO 8601)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    at: str | None


def failed_tries(tries: Iterable[FailedTry], reported: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every failed try, newest first: those Airflow recorded (``tries``), with the error and cleanup their own
    report gives (``reported``: the overview's ``failed_tries``, from ``FAILED_TRY`` XComs; a task's XComs hold
    only its latest try's), and the reported ones Airflow did not list. ``error`` is None where no report says it:
    the route reads it from the try's log (``error_line``)."""
    reports = {_try_key(report): report for report in reported}
    rows = []
    for failed in tries:
        key = (failed.dag_id, failed.run_id, failed.task_id, failed.map_index, failed.try_number)
        report = reports.pop(key, None)
        rows.append(
            {
                "dag_id": failed.dag_id,
                "run_id": failed.run_id,
                "task_id": failed.task_id,
                "map_index": failed.map_index,
                "try_number": failed.try_number,
                "at": failed.at,
                "error": report.get("error") if report else None,
                "cleanup": report.get("cleanup") if report else None,
            }
        )
    rows += [{**report, "map_index": report.get("map_index", -1)} for report in reports.values()]
    return sorted(rows, key=lambda row: (row["at"] or "", row["try_number"] or 0), reverse=True)


def _try_key(report: dict[str, Any]) -> tuple[str, str, str, int, int | None]:
    return (report["dag_id"], report["run_id"], report["task_id"], report.get("map_index", -1), report["try_number"])


def error_line(messages: Iterable[dict[str, Any]]) -> str | None:
    """A failed try's error in one line, from its log's structured messages: the exception of the last message
    that carries one (Airflow logs a task's exception under ``error_detail``, the raised one first), its message's
    first line after its type unless the type is one of Airflow's own; None if the log has none."""
    line = None
    for message in messages:
        detail = message.get("error_detail")
        if not isinstance(detail, list) or not detail or not isinstance(detail[0], dict):
            continue
        kind, text = str(detail[0].get("exc_type") or ""), str(detail[0].get("exc_value") or "")
        first = next((part.strip() for part in text.splitlines() if part.strip()), "")
        line = first if kind.startswith("Airflow") and first else f"{kind}: {first}" if first else kind or None
    return line


def run_label(run_id: str) -> str:
    """A run as a chart's label names it: its kind and when, from an id Airflow made (``manual__2026-11-25T22:03:43
    .622423+00:00`` is ``manual 2026-11-25 22:03:43``), else the id itself."""
    kind, _, when = run_id.partition("__")
    try:
        moment = datetime.datetime.fromisoformat(when)
    except ValueError:
        return run_id
    return f"{kind} {moment:%Y-%m-%d %H:%M:%S}"


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


def memory_storage(held: Iterable[tuple[str, int]], quota: int | None) -> list[dict[str, Any]]:
    """The copies kept in Spark Connect servers' memory, by server connection, against ``[spark_tables]
    cache_memory_quota`` (a server's): ``held`` is (server connection, bytes) a copy. Sums only: which DAGs' copies
    they are is not shown."""
    servers: dict[str, list[int]] = {}
    for server, size in held:
        servers.setdefault(server, []).append(size)
    return [
        {
            "server": server,
            "copies": len(sizes),
            "bytes": sum(sizes),
            "share": sum(sizes) / quota if quota else None,
        }
        for server, sizes in sorted(servers.items())
    ]


def _mean(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None
