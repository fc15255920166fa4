"""One Spark application at a time on the embedded Derby metastore, across every process of this machine."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator

from spark_tables.core.catalog_config import Catalog

log = logging.getLogger(__name__)


@contextlib.contextmanager
def exclusive_catalog(catalog: Catalog, holder: str) -> Iterator[None]:
    """Hold the catalog's lock file while the block runs; a catalog that admits many applications has none.

    ``holder`` (for example dag.task) is written into the lock file so that a waiting task can say whom it waits
    for. The lock is released by the kernel if the holding process dies.
    """
    if not catalog.exclusive:
        yield
        return
    os.makedirs(os.path.dirname(catalog.lock_path), exist_ok=True)
    with open(catalog.lock_path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            log.info(
                "waiting for the embedded catalog, in use by %s (Derby admits one Spark application at a time; "
                "a PostgreSQL metastore admits many)",
                handle.read().strip() or "another task",
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder} (pid {os.getpid()})\n")
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            fcntl.flock(handle, fcntl.LOCK_UN)
