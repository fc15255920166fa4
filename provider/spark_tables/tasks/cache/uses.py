"""A task's part in its run's cached tables, around its job: find the registered copies before, settle after.

Before the job: for each cached table the task reads that no copy of the run holds, the task claims it (single
flight, ``core.cache.claims``), or, if another task of the run computes it, it waits for that copy
(``CopyBeingComputed``: the operator defers); then, for each table, the copies of its definition this run has
registered, and a fresh folder for the copy the job writes if none is whole. After the job (also when it failed):
copies it found damaged are unregistered (their files deleted), the copy it wrote is registered, what it read is
marked used, and its claims are released; if another task registered a copy of the same definition first (one that
waited past the bound), this task's copy is withdrawn, so a run keeps one. Least recently used copies are evicted
past ``[spark_tables] cache_quota`` (on files) and ``cache_memory_quota`` (in a server's memory).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import Stats
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from spark_tables.core.cache.claims import CacheClaim, ClaimStep, claim_step
from spark_tables.core.cache.descriptor import CacheDescriptor, UntrustedDescriptor, descriptor_of_copy
from spark_tables.core.cache.layout import (
    cache_folder_name,
    copy_folder,
    is_memory_location,
    memory_parts,
    memory_record_folder,
    memory_view,
    run_folder,
)
from spark_tables.core.cache.table import MEMORY, CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.tasks.cache import claims, memory, registry, storage
from spark_tables.tasks.states import FINISHED_STATES, task_state
from spark_tables.utils import settings

log = logging.getLogger(__name__)

#: What each way of making a cached table ready counts as, in a task's cache summary.
_COUNTERS = {"hit": "hits", "miss": "misses", "fallback": "fallbacks"}
#: The numbers of a task's cache summary that add up over tasks (and are emitted as metrics).
COUNTS = (*_COUNTERS.values(), "bytes_read", "bytes_written")
#: How many claims a task tries to create in a row for one table before it waits for whoever created the latest.
_CLAIM_ATTEMPTS = 5


class CopyBeingComputed(Exception):
    """Another task of the run holds the claim of a cached table this task reads: wait for that task's copy."""

    def __init__(self, table: CachedTable, run: str, claim: CacheClaim) -> None:
        super().__init__(f"cache {table.name}: {claim.describe()} computes it")
        self.table, self.run, self.claim = table, run, claim


@dataclass(frozen=True)
class CacheWaits:
    """What a task waited for, kept across its deferrals, by cache folder (``<name>-<fingerprint>``): since when and
    until when (ISO), for which task, and the tables it waited for past the bound (computed without a claim)."""

    since: dict[str, str] = field(default_factory=dict)
    until: dict[str, str] = field(default_factory=dict)
    writers: dict[str, str] = field(default_factory=dict)
    past_bound: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "writers": self.writers, "past_bound": list(self.past_bound)}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> CacheWaits:
        data = data or {}
        return cls(
            dict(data.get("since", {})),
            dict(data.get("until", {})),
            dict(data.get("writers", {})),
            tuple(data.get("past_bound", ())),
        )

    def waiting(self, busy: CopyBeingComputed, now: str) -> CacheWaits:
        """These waits, and the wait for ``busy``'s table (since its first wait)."""
        folder = cache_folder_name(busy.table)
        writer = busy.claim.holder.task_id if busy.claim.holder else ""
        since = {**self.since, folder: self.since.get(folder, now)}
        return dataclasses.replace(self, since=since, writers={**self.writers, folder: writer})

    def resumed(self, cache_folder: str, now: str, past_bound: bool) -> CacheWaits:
        """These waits, the wait for ``cache_folder``'s table ended ``now`` (``past_bound``: by the bound)."""
        bound = (*self.past_bound, cache_folder) if past_bound else self.past_bound
        return dataclasses.replace(self, until={**self.until, cache_folder: now}, past_bound=bound)

    def summary(self, table: CachedTable) -> dict[str, Any] | None:
        """What the task's cache summary says of its wait for ``table``: None if it did not wait."""
        folder = cache_folder_name(table)
        if folder not in self.since:
            return None
        until = pendulum.parse(self.until[folder]) if folder in self.until else pendulum.now("UTC")
        seconds = (until - pendulum.parse(self.since[folder])).total_seconds()
        writer = self.writers[folder] or None  # None: its claim was not written yet when the task began to wait
        return {"for": writer, "seconds": round(seconds, 3), "past_bound": folder in self.past_bound}


@dataclass(frozen=True)
class TaskCaches:
    """A task's cached tables in its run, around its job: ``prepare`` claims and finds the copies before,
    ``settle`` records what the job did with them after and releases the claims. ``writers`` are the tasks of the
    DAG that can register a copy; ``server`` is the Spark connection of the Spark Connect server the task's job runs
    on (session mode), None in per-job mode: it reads and keeps copies in that server's memory."""

    ti: RuntimeTaskInstanceProtocol
    writers: tuple[str, ...] = ()
    uses: tuple[CacheUse, ...] = ()
    held: tuple[tuple[str, str, CacheClaim], ...] = ()  # (run folder, cache folder, claim) of each it computes
    waits: CacheWaits = CacheWaits()
    server: str | None = None

    @classmethod
    def prepare(
        cls,
        ti: RuntimeTaskInstanceProtocol,
        tables: Iterable[CachedTable],
        writers: Iterable[str],
        waits: CacheWaits = CacheWaits(),
        server: str | None = None,
    ) -> TaskCaches:
        """Raises ``CopyBeingComputed`` when another task of the run computes one of the tables: wait for it; and
        ``SpecError``, before anything is claimed, for a table whose storage this task's mode cannot keep."""
        writers, tables = tuple(writers), tuple(tables)
        for table in tables:
            table.storage_in(server)
        held = claim_missing(ti, tables, list(writers), waits.past_bound, server)
        return cls(ti, writers, cache_uses(ti, tables, list(writers), server), held, waits, server)

    @classmethod
    def of_launched(
        cls, ti: RuntimeTaskInstanceProtocol, writers: Iterable[str], uses: tuple[CacheUse, ...]
    ) -> TaskCaches:
        """The cached tables of the job an earlier try of this task launched, which this try takes the result of:
        with the claims that try held, which this one releases once it has settled them."""
        run, me = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id), TableOwner.of_task_instance(ti)
        held = []
        for use in uses:
            folder = cache_folder_name(use.table)
            current = claims.current(run, folder) if not use.registered else None
            if current is not None and not current.released and current.held_by_task_of(me):
                held.append((run, folder, current))
        return cls(ti, tuple(writers), uses, tuple(held))

    def settle(self, result: JobResult | None) -> dict[str, Any]:
        """What the task's XCom says of its cached tables (``caches``, ``cache_evictions``); nothing when it read
        none."""
        if not self.uses:
            return {}
        reports = result.caches if result is not None else {}
        try:
            summary = settle(self.ti, self.uses, reports, list(self.writers), self.server)
        finally:
            self.release_claims()
            release_leases(self.ti, self.uses)
        claimed = {folder: claim.number for _, folder, claim in self.held}
        for name, table in summary.items():
            use = next(u for u in self.uses if u.table.name == name)
            table["waited"] = self.waits.summary(use.table)
            table["claim"] = claimed.get(cache_folder_name(use.table))
        return {"caches": summary, "cache_evictions": evict_over_quota(self.ti, summary)}

    def settle_after_failure(self, result: JobResult | None) -> None:
        """``settle`` after a failed job: what it registers is kept, but it never raises over the job's error."""
        try:
            self.settle(result)
        except Exception:
            log.exception("could not register what the failed job did with its cached tables")

    def release_claims(self) -> None:
        """Release the claims this task holds: it is done with them (its copies registered, or its job failed)."""
        for run, folder, claim in self.held:
            claims.release(run, folder, claim.number)
            log.info("cache claim released: %s", claim.describe())


def cache_uses(
    ti: RuntimeTaskInstanceProtocol, tables: Iterable[CachedTable], task_ids: list[str], server: str | None = None
) -> tuple[CacheUse, ...]:
    """What the job needs to know of each cached table: the registered copies it can read, oldest first, and where
    it keeps a new one: a new folder, or a new view in the server's memory."""
    tables = tuple(tables)
    if not tables:
        return ()
    registry.require_backend()
    run, writer = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id), TableOwner.of_task_instance(ti)
    storage.mark_run(run, ti.dag_id, ti.run_id)
    uses = []
    for table in tables:
        found = readable_copies(ti, table, task_ids, server)
        log.info("cache %s: %d registered copies in this run that this task can read", table.describe(), len(found))
        for copy in found:  # eviction by another task leaves them alone while this one may read them
            storage.lease(_folder_of(run, copy), writer)
        kept_in = table.storage_in(server)
        location = memory_view(table) if kept_in == MEMORY else copy_folder(run, table, writer)
        uses.append(CacheUse(table=table, registered=tuple(found), location=location, storage=kept_in))
    return tuple(uses)


def readable_copies(
    ti: RuntimeTaskInstanceProtocol, table: CachedTable, task_ids: list[str], server: str | None
) -> list[CacheDescriptor]:
    """The copies of ``table`` this run has registered that a task's job can read, oldest first: every copy on
    files, and those kept in the memory of the server it runs on (``server``, its Spark connection; None in per-job
    mode, whose application is the job's own)."""
    copies = registry.registered(ti, table.name, task_ids, table.fingerprint)
    return [copy for copy in copies if not copy.in_memory or copy.server == server]


def claim_missing(
    ti: RuntimeTaskInstanceProtocol,
    tables: tuple[CachedTable, ...],
    task_ids: list[str],
    unclaimed: Collection[str] = (),
    server: str | None = None,
) -> tuple[tuple[str, str, CacheClaim], ...]:
    """Claim each table no copy of the run holds (but those in ``unclaimed``, by cache folder, which the task waited
    for past the bound): the claims this task now holds, with their run and cache folders. Tables are claimed in
    one order (name, fingerprint), so that no two tasks ever wait for each other. Raises ``CopyBeingComputed`` for
    the first table that another task's try computes and may still be computing."""
    if not tables:
        return ()
    registry.require_backend()
    held = []
    run, me = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id), TableOwner.of_task_instance(ti)
    for table in sorted(tables, key=lambda t: (t.name, t.fingerprint)):
        found = readable_copies(ti, table, task_ids, server)
        if cache_folder_name(table) in unclaimed or found:
            continue
        claim = _claim(ti, run, table, task_ids, me, server)
        if claim is not None:
            held.append((run, cache_folder_name(table), claim))
    return tuple(held)


def _claim(
    ti: RuntimeTaskInstanceProtocol,
    run: str,
    table: CachedTable,
    task_ids: list[str],
    me: TableOwner,
    server: str | None,
) -> CacheClaim | None:
    """The claim of ``table`` this try holds now; None if a copy was registered meanwhile."""
    folder = cache_folder_name(table)
    current = None
    for _ in range(_CLAIM_ATTEMPTS):
        current = claims.current(run, folder)
        step = claim_step(current, me, lambda c=current: task_state(ti.get_task_states, c.holder))
        if step is ClaimStep.HOLD:
            return current
        if step is ClaimStep.WAIT:
            raise CopyBeingComputed(table, run, current)
        # The holder registers its copy before its try ends or releases the claim: look once more before taking over.
        if readable_copies(ti, table, task_ids, server):
            return None
        claim = CacheClaim(current.number + 1 if current else 1, me, pendulum.now("UTC").isoformat())
        if claims.create(run, folder, claim):
            if current is None:
                log.info("cache %s: no copy in this run yet; this task computes it (%s)", table.name, claim.describe())
            else:
                log.warning(
                    "cache %s: %s ended without a copy; this task takes over (%s)",
                    table.name,
                    current.holder.describe() if current.holder else f"claim {current.number}",
                    claim.describe(),
                )
            return claim
    raise CopyBeingComputed(table, run, current or CacheClaim(1, None))  # others keep claiming it: wait for them


def settle(
    ti: RuntimeTaskInstanceProtocol,
    uses: tuple[CacheUse, ...],
    reports: dict[str, dict[str, Any]],
    task_ids: list[str],
    server: str | None = None,
) -> dict:
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
        _check_reported_copy(use, report)
        descriptor = descriptor_of_copy(use.table.name, use.table.fingerprint, report, writer, written_at, server or "")
        if descriptor is not None:
            descriptor.check_place(settings.cache_uri(), ti.dag_id, ti.run_id, ti.task_id, ti.map_index)
        withdrawn = written = None
        if descriptor is not None:
            registry.register(ti, descriptor)
            withdrawn = _withdrawn(ti, use.table, descriptor.location, task_ids, server)
            written = {"rows": descriptor.rows, "bytes": descriptor.bytes, "partitions": len(descriptor.partitions)}
        if withdrawn is not None:
            removed.append({"location": report["location"], "reason": withdrawn})
        elif not is_memory_location(report["location"]):
            storage.mark_used(report["location"])
        else:
            run = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id)
            record = memory_record_folder(run, use.table.name, use.table.fingerprint, report["location"])
            if descriptor is not None:
                storage.record_memory_copy(record, descriptor.location, descriptor.server, descriptor.bytes)
            else:
                storage.mark_used(record)
        summary[use.table.name] = {**_summary(use.table, report), "copy_written": written, "copies_removed": removed}
        _emit_metrics(ti, use.table.name, summary[use.table.name])
    return summary


def _check_reported_copy(use: CacheUse, report: dict[str, Any]) -> None:
    """The job's report must name a copy this task gave it: the one it asked it to write (a folder, or a view in a
    server's memory), or one of the registered copies it could read. A result in the exchange names what the task
    registers, deletes and marks, and others may write the exchange."""
    location = report["location"]
    asked = memory_parts(location)[1].rpartition(".")[2] if is_memory_location(location) else location
    if asked != use.location and location not in {copy.location for copy in use.registered}:
        raise UntrustedDescriptor(
            f"cache {use.table.name}: the job's result names the copy {location}, which this task neither asked it "
            "to write nor gave it to read: refused, and nothing registered"
        )


def release_leases(ti: RuntimeTaskInstanceProtocol, uses: tuple[CacheUse, ...]) -> None:
    """Release the leases this task took on the copies it could read (``cache_uses``)."""
    run, reader = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id), TableOwner.of_task_instance(ti)
    for use in uses:
        for copy in use.registered:
            storage.release_lease(_folder_of(run, copy), reader)


def _folder_of(run: str, copy: CacheDescriptor) -> str:
    """Where a copy's marks and leases are: its folder, or the record folder of a copy kept in memory."""
    if copy.in_memory:
        return memory_record_folder(run, copy.name, copy.fingerprint, copy.location)
    return copy.location


def leased(ti: RuntimeTaskInstanceProtocol, found: list[storage.Copy]) -> set[str]:
    """The copies (their folders) that a task holding a lease on may be reading now: its task instance has not
    finished. A lease of a finished task is stale, and removed."""
    live: set[str] = set()
    for copy in found:
        for reader in copy.readers:
            state = task_state(ti.get_task_states, reader)
            if state is None or state in FINISHED_STATES:  # none: its run is gone, or it was cleared
                storage.release_lease(copy.location, reader)
            else:
                live.add(copy.location)
    return live


def evict_over_quota(ti: RuntimeTaskInstanceProtocol, summary: dict[str, Any]) -> list[str]:
    """Evict least recently used copies past ``[spark_tables] cache_quota`` (on files) and ``cache_memory_quota``
    (kept in a server's memory), never one this task just used, nor one another task may be reading: their
    locations."""
    quota, memory_quota = settings.cache_quota(), settings.cache_memory_quota()
    if (quota is None and memory_quota is None) or not summary:
        return []
    found = storage.copies(settings.cache_uri())
    used = {table["location"] for table in summary.values()} | leased(ti, found)
    evicted = [copy.location for copy in storage.evict(found, quota, keep=used)] if quota is not None else []
    if memory_quota is not None:
        evicted += [copy.memory for copy in memory.evict(found, memory_quota, keep=used)]
    return evicted


def _withdrawn(
    ti: RuntimeTaskInstanceProtocol, table: CachedTable, written: str, task_ids: list[str], server: str | None
) -> str | None:
    """None when the copy just written is the first the run holds of those this task can read; if two tasks missed
    at once and both wrote one, the copy registered first stays and this one is withdrawn (its files deleted, or its
    memory released): why, then."""
    copies = readable_copies(ti, table, task_ids, server)
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


def _emit_metrics(ti: RuntimeTaskInstanceProtocol, name: str, summary: dict[str, Any]) -> None:
    tags = {"dag_id": ti.dag_id, "task_id": ti.task_id, "cache": name}
    for count in COUNTS:
        if summary[count]:
            Stats.incr(f"spark_tables.cache.{count}", count=summary[count], tags=tags)
