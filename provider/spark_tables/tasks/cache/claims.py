"""The claims of single-flight cached tables on the cache storage.

A claim is a file created exclusively (fsspec's ``xb`` mode through Airflow's object storage: ``O_EXCL`` on local
and NFS file systems, a conditional put on S3), so that of the consumers that create the same claim at once
exactly one does, on whichever machines their Celery workers run. ``core.cache.claims`` decides what a consumer
does with them; ``triggers.cached_table`` waits for a claim's copy in the triggerer.
"""

from __future__ import annotations

import time

from spark_tables.core.cache.claims import (
    CacheClaim,
    claim_file_name,
    claim_number,
    claimed_cache_folder,
    released_file_name,
)
from spark_tables.core.cache.layout import claims_folder
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.hooks.object_storage import storage_path

#: A claim file read empty is being written by its creator (whose write follows its exclusive creation at once):
#: it is read again this many times, this many seconds apart, before its holder counts as not known yet.
_EMPTY_CLAIM_READS = 40
_EMPTY_CLAIM_PAUSE = 0.05


@reached_by_airflow
def current(run: str, cache_folder: str) -> CacheClaim | None:
    """The current (highest) claim of a cached table in the run folder ``run``; None if it has none."""
    folder = storage_path(claims_folder(run))
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
    folder = storage_path(claims_folder(run))
    if not folder.exists():
        return set()
    return {name for name in (claimed_cache_folder(path.name) for path in folder.iterdir()) if name}


@reached_by_airflow
def create(run: str, cache_folder: str, claim: CacheClaim) -> bool:
    """Create ``claim`` exclusively; False if that claim exists already (another consumer created it first)."""
    folder = storage_path(claims_folder(run))
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
    (storage_path(claims_folder(run)) / released_file_name(cache_folder, number)).write_text("")
