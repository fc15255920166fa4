"""A task's part in its run's cached tables, around its job: find the registered copies before, settle after.

Before the job: for each cached table the task reads, the copies of its definition this run has registered,
and a fresh folder for the copy the job writes if none is whole. After the job (also when it failed): copies it
found damaged are unregistered (their files deleted), the copy it wrote is registered, what it read is marked
used; if another task registered a copy of the same definition first, this task's copy is withdrawn, so a run
keeps one. Least recently used copies are evicted past ``[spark_tables] cache_quota``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import Stats

from spark_tables.core.cache.descriptor import descriptor_of_copy
from spark_tables.core.cache.layout import copy_folder, run_folder
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.hooks.cache import registry, storage
from spark_tables.utils import settings

log = logging.getLogger(__name__)

#: What each way of making a cached table ready counts as, in a task's cache summary.
_COUNTERS = {"hit": "hits", "miss": "misses", "fallback": "fallbacks"}
#: The numbers of a task's cache summary that add up over tasks (and are emitted as metrics).
COUNTS = (*_COUNTERS.values(), "bytes_read", "bytes_written")


@dataclass(frozen=True)
class TaskCaches:
    """A task's cached tables in its run, around its job: ``prepare`` finds the copies before, ``settle`` records
    what the job did with them after. ``writers`` are the tasks of the DAG that can register a copy."""

    ti: Any
    writers: tuple[str, ...] = ()
    uses: tuple[CacheUse, ...] = ()

    @classmethod
    def prepare(cls, ti: Any, tables: Iterable[CachedTable], writers: Iterable[str]) -> TaskCaches:
        writers = tuple(writers)
        return cls(ti, writers, cache_uses(ti, tables, list(writers)))

    def settle(self, result: JobResult | None) -> dict[str, Any]:
        """What the task's XCom says of its cached tables (``caches``, ``cache_evictions``); nothing when it read
        none."""
        if not self.uses:
            return {}
        summary = settle(self.ti, self.uses, result.caches if result is not None else {}, list(self.writers))
        return {"caches": summary, "cache_evictions": evict_over_quota(summary)}

    def settle_after_failure(self, result: JobResult | None) -> None:
        """``settle`` after a failed job: what it registers is kept, but it never raises over the job's error."""
        try:
            self.settle(result)
        except Exception:
            log.exception("could not register what the failed job did with its cached tables")


def cache_uses(ti: Any, tables: Iterable[CachedTable], task_ids: list[str]) -> tuple[CacheUse, ...]:
    """What the job needs to know of each cached table: its registered copies, oldest first, and a new folder."""
    tables = tuple(tables)
    if not tables:
        return ()
    registry.require_backend()
    run, writer = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id), TableOwner.of_task_instance(ti)
    storage.mark_run(run, ti.dag_id, ti.run_id)
    uses = []
    for table in tables:
        found = registry.registered(ti, table.name, task_ids, table.fingerprint)
        log.info("cache %s: %d registered copies in this run", table.describe(), len(found))
        uses.append(CacheUse(table=table, registered=tuple(found), location=copy_folder(run, table, writer)))
    return tuple(uses)


def settle(ti: Any, uses: tuple[CacheUse, ...], reports: dict[str, dict[str, Any]], task_ids: list[str]) -> dict:
    """Record in the registry what the job did with each cached table; the task's cache summary, by name, with
    the copy the job wrote (``copy_written``) and the copies this task removed from the registry and why
    (``copies_removed``: damaged ones, and its own when another task registered a copy first)."""
    summary: dict[str, Any] = {}
    writer = TableOwner.of_task_instance(ti)
    for use in uses:
        report = reports.get(use.table.name)
        if report is None:  # the job ended before this table was ready
            continue
        removed: list[dict[str, str]] = []
        for damaged in report["damaged"]:
            for descriptor in use.registered:
                if descriptor.location == damaged["location"]:
                    reason = f"damaged: {damaged['problem']}"
                    registry.unregister(descriptor, reason)
                    removed.append({"location": descriptor.location, "reason": reason})
        written_at = pendulum.now("UTC").isoformat()
        descriptor = descriptor_of_copy(use.table.name, use.table.fingerprint, report, writer, written_at)
        withdrawn = written = None
        if descriptor is not None:
            registry.register(ti, descriptor)
            withdrawn = _withdrawn(ti, use.table, descriptor.location, task_ids)
            written = {"rows": descriptor.rows, "bytes": descriptor.bytes, "partitions": len(descriptor.partitions)}
        if withdrawn is None:
            storage.mark_used(report["location"])
        else:
            removed.append({"location": report["location"], "reason": withdrawn})
        summary[use.table.name] = {**_summary(use.table, report), "copy_written": written, "copies_removed": removed}
        _emit_metrics(ti, use.table.name, summary[use.table.name])
    return summary


def evict_over_quota(summary: dict[str, Any]) -> list[str]:
    """Evict least recently used copies past ``[spark_tables] cache_quota``, never one this task just used."""
    quota = settings.cache_quota()
    if quota is None or not summary:
        return []
    used = {table["location"] for table in summary.values()}
    return [copy.location for copy in storage.evict(settings.cache_uri(), quota, keep=used)]


def _withdrawn(ti: Any, table: CachedTable, written: str, task_ids: list[str]) -> str | None:
    """None when the copy just written is the run's first; if two tasks missed at once and both wrote one, the
    copy registered first stays and this one is withdrawn (its files deleted): why, then."""
    copies = registry.registered(ti, table.name, task_ids, table.fingerprint)
    if copies[0].location == written:
        return None
    mine = next(d for d in copies if d.location == written)
    reason = f"{copies[0].owner.task_id} registered its copy first"
    registry.unregister(mine, f"{copies[0].owner.describe()} registered a copy first")
    return reason


def _summary(table: CachedTable, report: dict[str, Any]) -> dict[str, Any]:
    counts = {counter: int(report["status"] == status) for status, counter in _COUNTERS.items()}
    return {
        "definition": table.definition(),
        "fingerprint": table.fingerprint,
        "status": report["status"],
        **counts,
        "bytes_read": report["bytes_read"],
        "bytes_written": report["bytes_written"],
        "seconds": report["seconds"],
        "location": report["location"],
        "damaged": report["damaged"],
        "unchecked": report["unchecked"],
    }


def _emit_metrics(ti: Any, name: str, summary: dict[str, Any]) -> None:
    tags = {"dag_id": ti.dag_id, "task_id": ti.task_id, "cache": name}
    for count in COUNTS:
        if summary[count]:
            Stats.incr(f"spark_tables.cache.{count}", count=summary[count], tags=tags)
