"""Copies of cached tables kept in a Spark Connect server's memory, from the Airflow side: a copy is released when its
registry entry goes (the run's release, an invalidation, a copy found gone or withdrawn), when it is evicted past
``[spark_tables] cache_memory_quota``, and when the sweep removes the folder of its ended run, through a session of its
own on the server whose connection names it. Its record folder under the cache root goes with it."""

from __future__ import annotations

import logging
import uuid

from spark_tables.core.cache.descriptor import CacheDescriptor
from spark_tables.core.cache.layout import cache_name, memory_parts, memory_record_folder, run_folder
from spark_tables.core.errors import SpecError
from spark_tables.hooks.spark_connect_job import ConnectServer, SparkConnectUnreachable, connect_session
from spark_tables.tasks.cache import storage
from spark_tables.utils import settings

log = logging.getLogger(__name__)


def release_copy(descriptor: CacheDescriptor) -> None:
    """Release the copy a registry entry names, and remove its record folder."""
    owner = descriptor.owner
    run = run_folder(settings.cache_uri(), owner.dag_id, owner.run_id)
    record = memory_record_folder(run, descriptor.name, descriptor.fingerprint, descriptor.location)
    release(descriptor.name, descriptor.server, descriptor.location)
    storage.remove(record)


def evict(found: list[storage.Copy], quota: int, keep: set[str]) -> list[storage.Copy]:
    """Release least recently used copies kept in memory of ``found``, never one in ``keep``, until those of each
    server take at most ``quota`` bytes of its memory together."""
    servers = {copy.server for copy in found if copy.memory}
    evicted = []
    for server in sorted(servers):
        held = [copy for copy in found if copy.memory and copy.server == server]
        for copy in storage.least_recently_used(held, quota, keep):
            release(_cache_of(copy), server, copy.memory)
            storage.remove(copy.location)
            log.info(
                "over the memory quota: evicted %s (%d bytes, last used %s)", copy.memory, copy.bytes, copy.last_used
            )
            evicted.append(copy)
    return evicted


def release_recorded(found: list[storage.Copy], run: str) -> None:
    """Release the copies kept in memory whose records are in run folder ``run`` (a run that ended or is gone, whose
    registry entries may be gone without a purge)."""
    for copy in found:
        if copy.memory and copy.location.startswith(f"{run}/"):
            release(_cache_of(copy), copy.server, copy.memory)


def release(name: str, server_conn_id: str, location: str) -> None:
    """Uncache the copy of cache ``name`` at ``location`` and drop its view, if the server's application that cached it
    still runs. A server that cannot be reached is logged, not raised: the copy ends with its application (or the
    server's restart)."""
    from spark_tables.jobs.cache.memory import release as release_view
    from spark_tables.jobs.session_facts import application_id

    held_by, view = memory_parts(location)
    try:
        server = ConnectServer.of(server_conn_id)
        server.check_reachable()
    except (SpecError, SparkConnectUnreachable) as err:
        log.warning(
            "cache %s: could not release the copy kept in memory at %s (%s): it ends with the server's application",
            name,
            location,
            err,
        )
        return
    with connect_session(server.session_url(str(uuid.uuid4()))) as spark:
        running = application_id(spark)
        if running != held_by:
            log.info("cache %s: the application %s that held %s has ended: nothing to release", name, held_by, view)
            return
        release_view(spark, view)
    log.info("cache %s: released the copy kept in memory at %s", name, location)


def _cache_of(copy: storage.Copy) -> str:
    """The cache name of a copy's record folder (``<run>/<name>-<fingerprint>/<view>``)."""
    return cache_name(copy.location.rstrip("/").rsplit("/", 2)[-2])
