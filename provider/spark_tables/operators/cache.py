"""Invalidating and releasing cached tables: FLIP-36's ``CachedTable.invalidateCache()`` and ``close()``.

Neither runs a Spark job: they delete registry XComs (whose purge deletes the copies' files, or releases a copy kept
in a Spark Connect server's memory through a session on it) and folders under the cache root. ``release_caches()``,
as the last line of a DAG, adds the teardown that releases a run's caches whether its tasks succeeded or failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException, BaseOperator
from airflow.sdk import Context
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from spark_tables.core.cache.descriptor import CacheDescriptor
from spark_tables.core.cache.layout import CLAIMS, cache_name, run_folder
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.errors import SpecError
from spark_tables.operators.cache_waits import cache_writers
from spark_tables.tasks.cache import claims, memory, registry, storage
from spark_tables.tasks.cache.uses import COUNTS
from spark_tables.utils import settings

#: Runs in these states may still read their caches; the sweep leaves their folders alone.
_ACTIVE_RUN_STATES = ["queued", "running"]


def invalidate(context: Context, name: str) -> list[CacheDescriptor]:
    """Delete every copy of cache ``name`` in this DAG run, its files or its memory and its registry entry; the copies
    removed."""
    registry.require_backend()
    removed = registry.registered(context["ti"], name, cache_writers(context))
    for descriptor in removed:
        registry.unregister(descriptor, f"invalidated by {context['ti'].task_id}")
    return removed


def removed_copies(removed: dict[str, list[CacheDescriptor]]) -> dict[str, Any]:
    """What a task's XCom says of the copies it removed: their locations by cache name, and each copy as it was
    (its rows, bytes and partitions, who wrote it and when), since its registry entry is gone with it."""
    return {
        "locations": {name: [copy.location for copy in copies] for name, copies in removed.items()},
        "copies": [
            {
                "name": copy.name,
                "location": copy.location,
                "rows": copy.rows,
                "bytes": copy.bytes,
                "partitions": len(copy.partitions),
                "written_by": copy.owner.task_id,
                "written_at": copy.written_at,
            }
            for copies in removed.values()
            for copy in copies
        ],
    }


class SparkCacheInvalidateOperator(BaseOperator):
    """Invalidate cached tables in this DAG run at once; the next task that uses one computes it again.

    XCom gets ``invalidated`` (cache name: copies removed) and ``removed_copies``: each copy as it was.
    """

    ui_color = "#fbeee0"

    def __init__(self, *, caches: Sequence[CachedTable], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.caches = tuple(caches)

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            removed = removed_copies({table.name: invalidate(context, table.name) for table in self.caches})
        except SpecError as err:
            raise AirflowFailException(str(err)) from None
        return {"invalidated": removed["locations"], "removed_copies": removed["copies"]}


class SparkCacheReleaseOperator(BaseOperator):
    """Release every cached table of this DAG run, and sweep what runs of this DAG that ended left behind.

    Meant as the run's teardown (see ``release_caches``). XCom gets ``released`` (cache name: copies removed),
    ``removed_copies`` (each copy as it was: rows, bytes, partitions, writer), ``swept_runs`` (run ids of ended or
    deleted runs whose folders were removed) and ``usage``: each cache's hits, misses, fallbacks and bytes read and
    written over the run's tasks.
    """

    ui_color = "#fbeee0"

    def execute(self, context: Context) -> dict[str, Any]:
        try:
            registry.require_backend()
        except SpecError as err:
            raise AirflowFailException(str(err)) from None
        ti = context["ti"]
        run = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id)
        # The caches of the run: those with copies on files, and those claimed (a copy in a server's memory has none)
        folders = {folder for folder in storage.folder_names(run) if folder != CLAIMS} | claims.claimed(run)
        names = {cache_name(folder) for folder in folders}
        released = removed_copies({name: invalidate(context, name) for name in sorted(names)})
        storage.remove(run)  # with copies no registry entry names (a writer that died before registering)
        self.log.info("released the caches of run %s: %s", ti.run_id, released["locations"] or "none were used")
        return {
            "released": released["locations"],
            "removed_copies": released["copies"],
            "swept_runs": sweep(ti, ti.dag_id),
            "usage": _usage(context),
        }


def sweep(ti: RuntimeTaskInstanceProtocol, dag_id: str | None = None) -> list[str]:
    """Remove the cache folders of runs (of ``dag_id``, or of every DAG) that have ended or no longer exist.

    Deleting a DAG run, or ``airflow db clean``, removes its registry XComs without purging them: this is what
    frees the files then, and the copies its tasks kept in a server's memory. A run that is cleared later computes
    its caches again.
    """
    swept = []
    found: list[storage.Copy] | None = None
    for run_dag_id, run_id, folder in storage.runs(settings.cache_uri(), dag_id):
        if (run_dag_id, run_id) == (ti.dag_id, ti.run_id):
            continue
        if ti.get_dr_count(dag_id=run_dag_id, run_ids=[run_id], states=_ACTIVE_RUN_STATES) == 0:
            found = storage.copies(settings.cache_uri()) if found is None else found
            memory.release_recorded(found, folder)
            storage.remove(folder)
            swept.append(run_id)
    return swept


class SparkCacheSweepOperator(BaseOperator):
    """Remove the cache folders of every DAG's runs that have ended or no longer exist: for a maintenance DAG."""

    ui_color = "#fbeee0"

    def execute(self, context: Context) -> dict[str, Any]:
        return {"swept_runs": sweep(context["ti"])}


def release_caches(task_id: str = "release_caches", **kwargs: Any) -> SparkCacheReleaseOperator:
    """Add, inside ``with DAG(...)``, the teardown that releases the run's caches after every task so far."""
    release = SparkCacheReleaseOperator(task_id=task_id, **kwargs)
    if not release.has_dag():
        raise SpecError("release_caches() must be called inside a `with DAG(...)` block, after the DAG's tasks")
    leaves = [task for task in release.dag.tasks if task is not release and not task.downstream_list]
    release.set_upstream(leaves)
    return release.as_teardown()


def _usage(context: Context) -> dict[str, dict[str, int]]:
    """Each cache's counts over this run's tasks, from the cache summaries in their XComs."""
    totals: dict[str, dict[str, int]] = {}
    for value in context["ti"].xcom_pull(task_ids=cache_writers(context)):
        for name, summary in (value.get("caches") or {}).items() if isinstance(value, dict) else ():
            total = totals.setdefault(name, dict.fromkeys(COUNTS, 0))
            for count in COUNTS:
                total[count] += summary[count]
    return totals
