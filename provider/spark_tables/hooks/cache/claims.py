"""The claims of single-flight cached tables on the cache storage, and the wait for a copy another task computes.

A claim is a file created exclusively (fsspec's ``xb`` mode through Airflow's object storage: ``O_EXCL`` on local
and NFS file systems, a conditional put on S3), so that of the consumers that create the same claim at once
exactly one does, on whichever machines their Celery workers run. ``core.cache.claims`` decides what a consumer
does with them; ``CachedTableTrigger`` waits in the triggerer, watching the claims only: whether a holder still
runs, the waiting task asks Airflow itself when the trigger says it is time to (``check_holder``).
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.sdk import ObjectStoragePath
from airflow.triggers.base import BaseTrigger, TriggerEvent

from spark_tables.core.cache.claims import (
    CacheClaim,
    claim_file_name,
    claim_number,
    claimed_cache_folder,
    released_file_name,
    wait_step,
)
from spark_tables.core.cache.layout import claims_folder
from spark_tables.core.storage_credentials import reached_by_airflow

#: A claim file read empty is being written by its creator (whose write follows its exclusive creation at once):
#: it is read again this many times, this many seconds apart, before its holder counts as not known yet.
_EMPTY_CLAIM_READS = 40
_EMPTY_CLAIM_PAUSE = 0.05


@reached_by_airflow
def current(run: str, cache_folder: str) -> CacheClaim | None:
    """The current (highest) claim of a cached table in the run folder ``run``; None if it has none."""
    folder = ObjectStoragePath(claims_folder(run))
    if not folder.exists():
        return None
    numbers = [n for n in (claim_number(cache_folder, path.name) for path in folder.iterdir()) if n is not None]
    if not numbers:
        return None
    number = max(numbers)
    released = (folder / released_file_name(cache_folder, number)).exists()
    path = folder / claim_file_name(cache_folder, number)
    try:
        text = path.read_text()
        for _ in range(_EMPTY_CLAIM_READS):  # created, not written yet (a local file: between open and close)
            if text.strip():
                break
            time.sleep(_EMPTY_CLAIM_PAUSE)
            text = path.read_text()
    except FileNotFoundError:  # the run's caches released meanwhile
        return None
    return CacheClaim.from_json(number, text, released)


@reached_by_airflow
def claimed(run: str) -> set[str]:
    """The cache folders (``<name>-<fingerprint>``) of every table claimed in the run folder ``run``: every table
    computed in the run, whether its copy lies in the run folder or in a server's memory."""
    folder = ObjectStoragePath(claims_folder(run))
    if not folder.exists():
        return set()
    return {name for name in (claimed_cache_folder(path.name) for path in folder.iterdir()) if name}


@reached_by_airflow
def create(run: str, cache_folder: str, claim: CacheClaim) -> bool:
    """Create ``claim`` exclusively; False if that claim exists already (another consumer created it first)."""
    folder = ObjectStoragePath(claims_folder(run))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with (folder / claim_file_name(cache_folder, claim.number)).open("xb") as file:
            file.write(claim.to_json().encode())
    except FileExistsError:
        return False
    return True


@reached_by_airflow
def release(run: str, cache_folder: str, number: int) -> None:
    """Mark claim ``number`` released: its holder is done with it (its copy registered, or its job failed)."""
    (ObjectStoragePath(claims_folder(run)) / released_file_name(cache_folder, number)).write_text("")


class CachedTableTrigger(BaseTrigger):
    """Waits, in the triggerer, while claim ``number`` of a cached table (``cache_folder`` in the run folder
    ``run``) is current and not released: until ``check_at``, when the task asks Airflow whether the holder still
    runs, and never past ``deadline`` (both ISO). Fires one event: ``outcome`` (``core.cache.claims.WaitOutcome``),
    ``cache`` and ``cache_folder``."""

    def __init__(
        self,
        *,
        run: str,
        cache_folder: str,
        number: int,
        check_at: str,
        deadline: str,
        poll_seconds: float,
        cache: str,
    ) -> None:
        super().__init__()
        self.run_folder = run
        self.cache_folder = cache_folder
        self.number = number
        self.check_at = check_at
        self.deadline = deadline
        self.poll_seconds = poll_seconds
        self.cache = cache

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "run": self.run_folder,
                "cache_folder": self.cache_folder,
                "number": self.number,
                "check_at": self.check_at,
                "deadline": self.deadline,
                "poll_seconds": self.poll_seconds,
                "cache": self.cache,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        check_at = datetime.datetime.fromisoformat(self.check_at)
        deadline = datetime.datetime.fromisoformat(self.deadline)
        while True:
            claim = await asyncio.to_thread(current, self.run_folder, self.cache_folder)
            outcome = wait_step(self.number, claim, datetime.datetime.now(datetime.UTC), check_at, deadline)
            if outcome is not None:
                self.log.info("cache %s, claim %d: %s", self.cache, self.number, outcome.value)
                yield TriggerEvent({"outcome": outcome.value, "cache": self.cache, "cache_folder": self.cache_folder})
                return
            await asyncio.sleep(self.poll_seconds)
