"""The cache registry: which copies of which cached tables a DAG run holds, kept in the run's XComs.

A task that wrote a copy registers its descriptor under ``spark_tables.cache.<name>`` on its own task instance;
a later task of the run finds the copies by looking that key up on the run's tasks that can write one. Deleting
a registry XCom goes through the cache-registry backend's ``purge``, which deletes the copy's files: so an
invalidation, the run's release and a cleared task that runs again all free them, and nothing else does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from airflow.providers.common.compat.sdk import XCom
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from spark_tables.core.cache.descriptor import CacheDescriptor, UntrustedDescriptor
from spark_tables.core.cache.table import registry_key
from spark_tables.core.errors import SpecError
from spark_tables.utils import settings

log = logging.getLogger(__name__)

#: The backend that keeps the registry (``spark_tables.xcom``), named rather than imported: it imports this layer.
BACKEND_PATH = "spark_tables.xcom.cache_registry.CacheRegistryXComBackend"


def require_backend() -> None:
    """Cached tables are registered through the cache-registry XCom backend: fail clearly if it is not set."""
    if BACKEND_PATH not in {f"{cls.__module__}.{cls.__qualname__}" for cls in XCom.__mro__}:
        raise SpecError(
            f"cached tables need the cache-registry XCom backend, and [core] xcom_backend is {XCom.__module__}."
            f"{XCom.__name__}: set it to {BACKEND_PATH} (AIRFLOW__CORE__XCOM_BACKEND); other XComs work as before"
        )


def registered(
    ti: RuntimeTaskInstanceProtocol, name: str, task_ids: Iterable[str], fingerprint: str | None = None
) -> list[CacheDescriptor]:
    """The copies of cache ``name`` this run has registered (of one definition, if ``fingerprint``), oldest first."""
    found: list[CacheDescriptor] = []
    for task_id in task_ids:
        values = XCom.get_all(key=registry_key(name), dag_id=ti.dag_id, task_id=task_id, run_id=ti.run_id)
        found += [v for v in values or [] if isinstance(v, CacheDescriptor) and _trusted(v, ti, task_id)]
    matching = [d for d in found if fingerprint is None or d.fingerprint == fingerprint]
    return sorted(matching, key=lambda d: (d.written_at, d.location))


def _trusted(descriptor: CacheDescriptor, ti: RuntimeTaskInstanceProtocol, task_id: str) -> bool:
    """Whether a registry entry names a copy of its own task's, under the cache root (an XCom can be written through
    Airflow's API by anyone who may edit the DAG's XComs): one that does not is logged and left alone."""
    try:
        descriptor.check_place(settings.cache_uri(), ti.dag_id, ti.run_id, task_id, None)
    except UntrustedDescriptor as err:
        log.warning("%s", err)
        return False
    return True


def register(ti: RuntimeTaskInstanceProtocol, descriptor: CacheDescriptor) -> None:
    XCom.set(
        key=registry_key(descriptor.name),
        value=descriptor,
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        run_id=ti.run_id,
        map_index=ti.map_index,
    )
    log.info("cache %s: registered the copy %s", descriptor.name, descriptor.describe())


def unregister(descriptor: CacheDescriptor, why: str) -> None:
    """Delete a copy's registry entry, on whichever task of the run it is; its files go with it (``purge``)."""
    XCom.delete(
        key=registry_key(descriptor.name),
        dag_id=descriptor.owner.dag_id,
        task_id=descriptor.owner.task_id,
        run_id=descriptor.owner.run_id,
        map_index=descriptor.owner.map_index,
    )
    log.info("cache %s: removed the copy at %s (%s)", descriptor.name, descriptor.location, why)
