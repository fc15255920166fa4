"""Where cached tables lie under the cache root: a folder a DAG run, a folder a cache, a folder a copy.

``<root>/<dag>/<run>/<cache name>-<fingerprint>/<task>__<map index>__<try>__<hash>-<nonce>/part-*.parquet``.
Every task that writes a cache writes its own copy folder, so two writers never touch each other's files; the
run folder holds ``_run.json`` (its dag and run ids, for the sweep of runs that no longer exist) and ``_claims/``,
the claims of the tables computed in the run (``<cache name>-<fingerprint>.<number>.json``, see ``claims``).

A copy kept in a Spark Connect server's memory is a cached global temporary view there, one a task try:
``memory:<application id>/<global temp database>.spark_tables_<cache name>_<fingerprint>_<nonce>``. The application
id tells a later reader whether the server that cached it still runs. It has a record folder in its cache folder,
named after its view, holding ``_memory.json`` (its location, server and bytes) and ``_last_used``: the quota and the
sweep of ended runs find it there as they find copies on files.
"""

from __future__ import annotations

import dataclasses
import re
import uuid

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.names import flat_name

RUN_MARKER = "_run.json"
#: In a copy folder: when a task last read the copy, for least-recently-used eviction under the quota.
LAST_USED = "_last_used"
#: In the record folder of a copy kept in a server's memory: its location there, its server and its bytes.
MEMORY_RECORD = "_memory.json"
#: In a copy folder (or a record folder): the leases of the tasks that may be reading the copy, a file each.
READERS = "_readers"
#: In a run folder: the claims of its cached tables, beside the cache folders (its name is no cache's: no "-").
CLAIMS = "_claims"


def run_folder(cache_root: str, dag_id: str, run_id: str) -> str:
    return f"{cache_root.rstrip('/')}/{flat_name([dag_id])}/{flat_name([run_id])}"


def cache_folder_name(table: CachedTable) -> str:
    return f"{table.name}-{table.fingerprint}"


def claims_folder(run: str) -> str:
    return f"{run}/{CLAIMS}"


def cache_name(folder_name: str) -> str:
    """The cache name a cache folder is named after."""
    return folder_name.rsplit("-", 1)[0]


def copy_folder(run: str, table: CachedTable, owner: TableOwner) -> str:
    """A new folder for the copy this task try writes (a nonce: an attempt of the same try never reuses one)."""
    return f"{run}/{cache_folder_name(table)}/{_writer(owner)}-{uuid.uuid4().hex[:8]}"


def copy_folder_of(run: str, name: str, fingerprint: str, owner: TableOwner, location: str) -> bool:
    """Whether ``location`` is a folder ``copy_folder`` gives ``owner``'s task for cache ``name`` in run folder
    ``run``: in ``owner``'s try or an earlier one (a try that takes over a lost try's durable job registers the copy
    that try's job wrote)."""
    for try_number in range(1, max(owner.try_number, 1) + 1):
        prefix = f"{run}/{name}-{fingerprint}/{_writer(dataclasses.replace(owner, try_number=try_number))}-"
        if location.startswith(prefix) and re.fullmatch(r"[0-9a-f]{8}", location[len(prefix) :]):
            return True
    return False


def _writer(owner: TableOwner) -> str:
    return flat_name([owner.task_id, str(owner.map_index), str(owner.try_number)])


#: The scheme of a copy kept in a Spark Connect server's memory.
MEMORY_SCHEME = "memory:"


def memory_view(table: CachedTable) -> str:
    """A new global temporary view for the copy this task try keeps in memory (a nonce, as ``copy_folder``'s)."""
    return f"spark_tables_{table.name}_{table.fingerprint}_{uuid.uuid4().hex[:8]}"


def memory_copy_of(name: str, fingerprint: str, location: str) -> bool:
    """Whether ``location`` is that of a copy of cache ``name`` kept in a server's memory, as ``memory_view`` names its
    view (in the server's global temporary database)."""
    view = rf"[A-Za-z0-9_]+\.spark_tables_{re.escape(name)}_{re.escape(fingerprint)}_[0-9a-f]{{8}}"
    return bool(re.fullmatch(rf"{re.escape(MEMORY_SCHEME)}[A-Za-z0-9_-]+/{view}", location))


def is_memory_location(location: str) -> bool:
    """Whether ``location`` is that of a copy kept in a Spark Connect server's memory (no folder to mark or evict)."""
    return location.startswith(MEMORY_SCHEME)


def memory_location(application_id: str, qualified_view: str) -> str:
    return f"{MEMORY_SCHEME}{application_id}/{qualified_view}"


def memory_parts(location: str) -> tuple[str, str]:
    """The application id and the qualified view of a copy kept in memory."""
    application_id, _, view = location.removeprefix(MEMORY_SCHEME).partition("/")
    return application_id, view


def memory_record_folder(run: str, name: str, fingerprint: str, location: str) -> str:
    """The record folder of the copy of cache ``name`` kept in memory at ``location``, in run folder ``run``."""
    view = memory_parts(location)[1].rsplit(".", 1)[-1]
    return f"{run}/{name}-{fingerprint}/{view}"
