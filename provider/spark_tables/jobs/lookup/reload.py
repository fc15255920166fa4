"""Full-cache snapshots on storage, from the driver: read the pointer, load and publish a snapshot, drop old ones.

The rows themselves are written and read by Spark; the pointer is one small file written atomically. Every load of
a table, a scheduled reload or a FULL join's first load, runs under one lock per table (``exclusive_load``), held
in the lookup table's own system (its database, its catalog's metastore), so two loads never publish at once: a
load that had to wait for another, and finds that it published, uses that snapshot instead of loading its own.

A table with versions (a Delta table) is copied as of the version its format says it is at, which the snapshot
records; a load that finds the table at the version the current snapshot holds copies nothing and publishes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import time
from collections.abc import Iterator

from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.errors import JobError, one_line
from spark_tables.core.lookup.job import LookupReloadJob
from spark_tables.core.lookup.options import ReloadStrategy
from spark_tables.core.lookup.result import LookupReloadResult
from spark_tables.core.lookup.snapshot import POINTER, FailedReloads, Pointer, Snapshot, is_version, new_version
from spark_tables.core.lookup.table import LookupSpec
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs import files
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.lookup.retries import retrying
from spark_tables.jobs.lookup.source import LookupSource, source_for
from spark_tables.jobs.session_facts import default_parallelism

log = logging.getLogger(__name__)

#: Seconds between two tries of a lock another load holds.
LOCK_POLL_SECONDS = 0.5


def _join(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def read_pointer(root: str) -> Pointer:
    """The pointer of the lookup table at ``root``; one with no snapshot and no loads before anything was written."""
    try:
        text = files.read_text(_join(root, POINTER))
    except FileNotFoundError:
        return Pointer(current=None)
    return Pointer.from_dict(json.loads(text), root)


def publish(root: str, pointer: Pointer) -> None:
    """Replace the pointer in one atomic write."""
    files.write_text(_join(root, POINTER), json.dumps(pointer.to_dict()))


def versions(root: str) -> list[str]:
    """The snapshot versions under ``root``, oldest first."""
    return [name for name in files.list_names(root) if is_version(name)]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


#: In a lookup table's snapshot root: the leases of the joins reading each version, ``<version>/<reader>.json``.
READERS = "_readers"
#: How long a join's lease on the snapshot it reads holds, unless it renews or releases it: a join that dies holding
#: one keeps its version from retention this long at most.
LEASE_SECONDS = 6 * 3600


def lease_snapshot(root: str, version: str, reader: str) -> None:
    """Note that join ``reader`` reads ``version`` now: retention leaves the version alone while the lease holds."""
    until = (_now() + datetime.timedelta(seconds=LEASE_SECONDS)).isoformat()
    files.write_text(_join(root, f"{READERS}/{version}/{reader}.json"), json.dumps({"until": until}))


def release_snapshot(root: str, version: str, reader: str) -> None:
    files.remove(_join(root, f"{READERS}/{version}/{reader}.json"))


def leased_versions(root: str) -> set[str]:
    """The versions a join holds a lease on now; expired leases (their joins died) are removed."""
    held: set[str] = set()
    now = _now()
    for version in files.folder_names(_join(root, READERS)):
        for name in files.list_names(_join(root, f"{READERS}/{version}")):
            lease = _join(root, f"{READERS}/{version}/{name}")
            try:
                until = datetime.datetime.fromisoformat(json.loads(files.read_text(lease))["until"])
            except FileNotFoundError:
                continue  # released meanwhile
            except (ValueError, KeyError, TypeError):
                until = now  # not a lease: it holds nothing
            if until > now:
                held.add(version)
            else:
                files.remove(lease)
    return held


class LoadFailed(JobError):
    """Every attempt to load a snapshot failed; the pointer has counted it and kept the snapshot it had."""

    def __init__(self, message: str, output: LookupReloadResult) -> None:
        super().__init__(message)
        self.output = output


@dataclasses.dataclass(frozen=True)
class Load:
    """What one load did: the pointer it left, and whether it loaded (False: it used one a concurrent load published
    while it waited for the lock, or, ``unchanged``, the table was at the version the snapshot holds)."""

    pointer: Pointer
    loaded: bool
    attempts: int = 0
    dropped: tuple[str, ...] = ()
    unchanged: bool = False

    def output(self, lookup: str) -> LookupReloadResult:
        """The reload's result: the current snapshot, the table's counters, and this load's attempts and drops."""
        return LookupReloadResult.of(
            lookup,
            self.pointer,
            loaded=self.loaded,
            attempts=self.attempts,
            dropped=self.dropped,
            unchanged=self.unchanged,
        )


@contextlib.contextmanager
def exclusive_load(
    source: LookupSource, lookup: LookupSpec, cancellation: Cancellation
) -> Iterator[tuple[Pointer, bool]]:
    """Hold the table's load lock; yields the pointer as it is once held, and whether another load held it first."""
    waiting_logged = False

    def while_waiting() -> None:
        nonlocal waiting_logged
        cancellation.check()
        if not waiting_logged:
            log.info("lookup table %s: waiting for another load of its snapshot to end", lookup.name)
            waiting_logged = True
        time.sleep(LOCK_POLL_SECONDS)

    with source.exclusive(f"spark_tables.lookup:{lookup.snapshots}", while_waiting) as waited:
        yield read_pointer(lookup.snapshots), waited


def load_snapshot(
    spark: SparkSession,
    lookup: LookupSpec,
    cancellation: Cancellation,
    *,
    scheduled_for: str | None = None,
    num_partitions: int | None = None,
    retained: int = 2,
    only_if_missing: bool = False,
) -> Load:
    """Scan the table into a new version, retrying with backoff, and publish it, under the table's load lock.

    If a concurrent load published while this one waited for the lock, its snapshot is used instead. With
    ``only_if_missing`` (a FULL join's first load), nothing is loaded when a snapshot exists once the lock is held.
    A table found at the version the current snapshot holds is not copied again. A load whose attempts all fail
    keeps the current snapshot, records the failure in the pointer (the reload schedule backs off from it) and
    raises ``LoadFailed``.
    """
    source = source_for(lookup.source)
    try:
        before = read_pointer(lookup.snapshots)
        with exclusive_load(source, lookup, cancellation) as (pointer, waited):
            published_meanwhile = waited and pointer.current is not None and pointer.current != before.current
            if published_meanwhile or (only_if_missing and pointer.current is not None):
                log.info(
                    "lookup table %s: using snapshot %s, which another load published",
                    lookup.name,
                    pointer.current.version,
                )
                return Load(pointer=pointer, loaded=False)
            return _load(spark, source, lookup, pointer, cancellation, scheduled_for, num_partitions, retained)
    finally:
        source.close()


def _load(
    spark: SparkSession,
    source: LookupSource,
    lookup: LookupSpec,
    previous: Pointer,
    cancellation: Cancellation,
    scheduled_for: str | None,
    num_partitions: int | None,
    retained: int,
) -> Load:
    """Readers are never blocked: they read whichever version the pointer names, and the new one is written beside
    it on disk, so a load needs no second copy in memory."""
    root = lookup.snapshots
    started = _now()
    version = new_version(started)
    location = _join(root, version)
    observation: Observation | None = None
    partitions = num_partitions or default_parallelism(spark)
    attempts = 0
    held = previous.current.table_version if previous.current is not None else None

    def attempt() -> TableVersion | None:
        """The table's version, copied into ``location`` unless it is the one the snapshot holds."""
        nonlocal attempts, observation
        attempts += 1
        cancellation.check()
        files.remove(location)  # what a failed attempt left
        table_version = source.version(spark)
        if table_version is None and lookup.lookup_options.reload_strategy is ReloadStrategy.ON_CHANGE:
            raise JobError(
                f"lookup.full-cache.reload-strategy=ON_CHANGE needs a table with versions, and {lookup.source.table} "
                "has none (it is not a Delta table): use PERIODIC or TIMED"
            )
        if table_version is not None and table_version == held:
            return table_version
        observation = Observation(f"lookup_reload_{lookup.name}_{attempts}")
        frame = source.scan(spark, partitions, table_version)
        frame.observe(observation, F.count(F.lit(1)).alias("rows")).write.mode("overwrite").parquet(location)
        return table_version

    log.info("loading lookup table %s from %s into %s", lookup.name, lookup.source.table, location)
    try:
        table_version = retrying(
            attempt, max_retries=lookup.lookup_options.max_retries, what=f"load of lookup table {lookup.name}"
        )
    except Exception as err:
        files.remove(location)
        failed = _failed(previous, started, one_line(err), scheduled_for)
        publish(root, failed)
        kept = f"snapshot {previous.current.version} stays in use" if previous.current else "no snapshot yet"
        raise LoadFailed(
            f"load of lookup table {lookup.name} failed after {attempts} attempt(s) "
            f"({failed.failing.count} failed load(s) in a row): {one_line(err)}; {kept}",
            Load(pointer=failed, loaded=False, attempts=attempts).output(lookup.name),
        ) from err
    if table_version is not None and table_version == held:
        log.info(
            "lookup table %s: %s is the one snapshot %s holds: nothing to load",
            lookup.name,
            held.describe(),
            previous.current.version,
        )
        return Load(pointer=previous, loaded=False, attempts=attempts, unchanged=True)
    finished = _now()
    snapshot = Snapshot(
        version=version,
        location=location,
        rows=int(observation.get["rows"]),
        bytes=files.folder_bytes(location),
        started=started.isoformat(),
        finished=finished.isoformat(),
        load_milliseconds=round((finished - started).total_seconds() * 1000),
        scheduled_for=scheduled_for,
        table_version=table_version,
    )
    pointer = Pointer(current=snapshot, loads=previous.loads + 1, load_failures=previous.load_failures)
    publish(root, pointer)
    leased = leased_versions(root)
    dropped = tuple(old for old in versions(root)[:-retained] if old != snapshot.version and old not in leased)
    for old in dropped:
        files.remove(_join(root, old))
    log.info(
        "published snapshot %s of %s: %d rows, %d bytes%s",
        snapshot.version,
        lookup.name,
        snapshot.rows,
        snapshot.bytes,
        f", {table_version.describe()}" if table_version is not None else "",
    )
    return Load(pointer=pointer, loaded=True, attempts=attempts, dropped=dropped)


def _failed(previous: Pointer, started: datetime.datetime, error: str, scheduled_for: str | None) -> Pointer:
    """The pointer after a failed load: the same snapshot, one more failure, and one more in the failing run."""
    in_a_row = previous.failing.count if previous.failing else 0
    failing = FailedReloads(
        count=in_a_row + 1,
        started=started.isoformat(),
        finished=_now().isoformat(),
        error=error,
        scheduled_for=scheduled_for,
    )
    return dataclasses.replace(previous, load_failures=previous.load_failures + 1, failing=failing)


def run_lookup_reload(spark: SparkSession, job: LookupReloadJob, cancellation: Cancellation) -> LookupReloadResult:
    """Load a new snapshot of the table and publish it; the old one stays in use if the load fails."""
    return load_snapshot(
        spark,
        job.lookup,
        cancellation,
        scheduled_for=job.scheduled_for,
        num_partitions=job.num_partitions,
        retained=job.retained,
    ).output(job.lookup.name)
