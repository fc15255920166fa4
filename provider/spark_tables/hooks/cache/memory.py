"""Copies of cached tables kept in a Spark Connect server's memory, from the Airflow side: a copy is released when its
registry entry goes (the run's release, an invalidation, a copy found gone or withdrawn), through a session of its
own on the server whose connection its descriptor names."""

from __future__ import annotations

import logging
import uuid

from spark_tables.core.cache.descriptor import CacheDescriptor
from spark_tables.core.cache.layout import memory_parts
from spark_tables.core.errors import SpecError
from spark_tables.hooks.spark_connect_job import ConnectServer, SparkConnectUnreachable, connect_session

log = logging.getLogger(__name__)


def release_copy(descriptor: CacheDescriptor) -> None:
    """Uncache the copy and drop its view, if the server's application that cached it still runs. A server that
    cannot be reached is logged, not raised: the copy ends with its application (or the server's restart)."""
    from spark_tables.jobs.cache.memory import release
    from spark_tables.jobs.session_facts import application_id

    held_by, view = memory_parts(descriptor.location)
    try:
        server = ConnectServer.of(descriptor.server)
        server.check_reachable()
    except (SpecError, SparkConnectUnreachable) as err:
        log.warning(
            "cache %s: could not release the copy kept in memory at %s (%s): it ends with the server's application",
            descriptor.name,
            descriptor.location,
            err,
        )
        return
    with connect_session(server.session_url(str(uuid.uuid4()))) as spark:
        running = application_id(spark)
        if running != held_by:
            log.info(
                "cache %s: the application %s that held %s has ended: nothing to release",
                descriptor.name,
                held_by,
                view,
            )
            return
        release(spark, view)
    log.info("cache %s: released the copy kept in memory at %s", descriptor.name, descriptor.location)
