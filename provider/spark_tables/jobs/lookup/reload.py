"""Full-cache snapshots on storage, from the driver: read the pointer, publish one, reload one, drop old ones.

The rows themselves are written and read by Spark; the pointer is one small file written atomically.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
from typing import Any

from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.errors import JobError, one_line
from spark_tables.core.lookup.job import LookupReloadJob
from spark_tables.core.lookup.snapshot import POINTER, Snapshot, is_version, new_version
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.exchange_files import read_text, write_result
from spark_tables.jobs.lookup.metrics import UNINITIALIZED
from spark_tables.jobs.lookup.retries import retrying
from spark_tables.jobs.lookup.source import source_for
from spark_tables.jobs.storage_files import folder_bytes, list_names, remove

log = logging.getLogger(__name__)


def _join(root: str, name: str) -> str:
    return f"{root.rstrip('/')}/{name}"


def current_snapshot(root: str) -> Snapshot | None:
    """The published snapshot of the lookup table at ``root``; None before its first load."""
    try:
        text = read_text(_join(root, POINTER))
    except FileNotFoundError:
        return None
    return Snapshot.from_dict(json.loads(text))


def publish(root: str, snapshot: Snapshot) -> None:
    """Make ``snapshot`` the current one in one atomic write of the pointer."""
    write_result(_join(root, POINTER), json.dumps(snapshot.to_dict()))


def versions(root: str) -> list[str]:
    """The snapshot versions under ``root``, oldest first."""
    return [name for name in list_names(root) if is_version(name)]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def run_lookup_reload(spark: SparkSession, job: LookupReloadJob, cancellation: Cancellation) -> dict[str, Any]:
    """Scan the table into a new version, retrying with backoff; publish it, or keep the old one and count a failure.

    Readers are never blocked: they read whichever version the pointer names, and the new one is written beside
    it on disk, so the reload needs no second copy in memory.
    """
    lookup, root = job.lookup, job.lookup.snapshots
    options = lookup.lookup_options
    source = source_for(lookup.source)
    previous = current_snapshot(root)
    started = _now()
    version = new_version(started)
    location = _join(root, version)
    observation: Observation | None = None
    partitions = job.num_partitions or spark.sparkContext.defaultParallelism
    attempts = 0

    def load() -> None:
        nonlocal attempts, observation
        attempts += 1
        cancellation.check()
        remove(location)  # what a failed attempt left
        observation = Observation(f"lookup_reload_{lookup.name}_{attempts}")
        frame = source.scan(spark, partitions).observe(observation, F.count(F.lit(1)).alias("rows"))
        frame.write.mode("overwrite").parquet(location)

    log.info("reloading lookup table %s from %s into %s", lookup.name, lookup.source.table, location)
    try:
        retrying(load, max_retries=options.max_retries, what=f"reload of lookup table {lookup.name}")
    except Exception as err:
        remove(location)
        kept = "no snapshot yet"
        if previous is not None:
            publish(root, dataclasses.replace(previous, load_failures=previous.load_failures + 1))
            kept = f"snapshot {previous.version} stays in use"
        failure = JobError(
            f"reload of lookup table {lookup.name} failed after {attempts} attempt(s): {one_line(err)}; {kept}"
        )
        failure.output = {"metrics": full_cache_metrics(previous, failed=True)}  # type: ignore[attr-defined]
        raise failure from err
    finally:
        source.close()
    finished = _now()
    snapshot = Snapshot(
        version=version,
        location=location,
        rows=int(observation.get["rows"]),
        bytes=folder_bytes(location),
        started=started.isoformat(),
        finished=finished.isoformat(),
        load_milliseconds=round((finished - started).total_seconds() * 1000),
        scheduled_for=job.scheduled_for,
        loads=(previous.loads + 1) if previous else 1,
        load_failures=previous.load_failures if previous else 0,
    )
    publish(root, snapshot)
    dropped = [version for version in versions(root)[: -job.retained] if version != snapshot.version]
    for version in dropped:
        remove(_join(root, version))
    log.info(
        "published snapshot %s of %s: %d rows, %d bytes", snapshot.version, lookup.name, snapshot.rows, snapshot.bytes
    )
    return {
        "snapshot": snapshot.to_dict(),
        "attempts": attempts,
        "dropped": dropped,
        "metrics": full_cache_metrics(snapshot),
    }


def full_cache_metrics(snapshot: Snapshot | None, failed: bool = False) -> dict[str, Any]:
    """The FLIP's metrics of a full cache: the table's loads so far (``failed``: and this one, which failed) and
    what the current snapshot holds."""
    if snapshot is None:
        return {
            "loadCount": 0,
            "numLoadFailure": int(failed),
            "latestLoadTime": UNINITIALIZED,
            "numCachedRecords": 0,
            "numCachedBytes": 0,
        }
    return {
        "loadCount": snapshot.loads,
        "numLoadFailure": snapshot.load_failures + int(failed),
        "latestLoadTime": snapshot.load_milliseconds,
        "numCachedRecords": snapshot.rows,
        "numCachedBytes": snapshot.bytes,
    }
