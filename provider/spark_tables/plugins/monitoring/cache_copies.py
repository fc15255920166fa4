"""What the pages show of cached tables: each copy's life in a run (computed, read, removed, evicted, invalidated,
released) and state, and the cache root's and the Connect servers' memory use against their quotas.

A registry XCom (``spark_tables.cache.<name>``) is a live copy of a cached table; a task that used one says which
copy it wrote and which it removed, the release and invalidation tasks which copies they removed, each as it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spark_tables.core.cache.descriptor import CacheDescriptor, is_descriptor
from spark_tables.core.cache.table import REGISTRY_KEY_PREFIX
from spark_tables.plugins.monitoring.entries import RETURN_VALUE, XComEntry

#: A cached table copy's states, as the run tab shows them.
LIVE, INVALIDATED, EVICTED, RELEASED, REMOVED = "live", "invalidated", "evicted", "released", "removed"
#: The events that end a copy, and the state each leaves it in.
ENDED = {"removed": REMOVED, "invalidated": INVALIDATED, "released": RELEASED}
#: What the run tab shows of each copy besides its location, state and events, where known.
COPY_FIELDS = ("written_by", "rows", "bytes", "partitions", "written_at")


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
