"""The cache-registry XCom backend: the registry of cached tables' copies, in the XComs of a deployment's own backend.

Set ``[core] xcom_backend = spark_tables.xcom.cache_registry.CacheRegistryXComBackend``. A ``CacheDescriptor``
is stored as a tagged JSON object (readable as it is in the Airflow UI) and read back as a descriptor; purging
such an XCom deletes the copy's files, or releases a copy kept in a Spark Connect server's memory, once the
descriptor is proven the XCom's own task's copy, under the cache root (``CacheDescriptor.check_place``): a forged
or damaged one (Airflow's API lets whoever may edit a DAG's XComs write one) is logged and its copy left alone.
Every other value is stored, read and purged by the backend ``[spark_tables] other_xcom_backend`` names (say the
common-io provider's ``XComObjectStorageBackend``), Airflow's own by default: a deployment keeps the backend it has
for every XCom but the registry's.

Airflow runs an XCom backend only in task processes, and calls ``purge`` only when an XCom is deleted through
it: by this provider (invalidation, release, a damaged copy replaced) and when a cleared task runs again. Rows
removed by deleting a DAG run or ``airflow db clean`` are not purged; the release and sweep tasks remove the
folders of runs that have ended or no longer exist.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from airflow.sdk import BaseXCom

from spark_tables.core.cache.descriptor import CacheDescriptor, UntrustedDescriptor, is_descriptor
from spark_tables.core.errors import SpecError
from spark_tables.tasks.cache import memory, storage
from spark_tables.utils import settings

log = logging.getLogger(__name__)


class CacheRegistryXComBackend(BaseXCom):
    @staticmethod
    def serialize_value(
        value: Any,
        *,
        key: str | None = None,
        task_id: str | None = None,
        dag_id: str | None = None,
        run_id: str | None = None,
        map_index: int | None = None,
    ) -> Any:
        if isinstance(value, CacheDescriptor):
            return value.to_dict()
        return other_backend().serialize_value(
            value, key=key, task_id=task_id, dag_id=dag_id, run_id=run_id, map_index=map_index
        )

    @staticmethod
    def deserialize_value(result: Any) -> Any:
        if is_descriptor(result.value):
            try:
                return CacheDescriptor.from_dict(result.value)
            except SpecError as err:  # not one this provider wrote: the value as it is, which no reader takes
                log.warning("%s", err)
                return result.value
        return other_backend().deserialize_value(result)

    @classmethod
    def delete(cls, key: str, task_id: str, dag_id: str, run_id: str, map_index: int | None = None) -> None:
        """Airflow's delete, which purges the value first; the purge learns whose XCom it is from here."""
        with deleting(dag_id, run_id, task_id, map_index):
            super().delete(key=key, task_id=task_id, dag_id=dag_id, run_id=run_id, map_index=map_index)

    @classmethod
    def purge(cls, xcom: Any, *args: Any) -> None:
        if not is_descriptor(xcom.value):
            other_backend().purge(xcom, *args)
            return
        try:
            descriptor = CacheDescriptor.from_dict(xcom.value)
            task = _deleting.get()
            if task is None:
                raise UntrustedDescriptor(
                    f"cache {descriptor.name}: a registry XCom was purged without its task's identity: its copy at "
                    f"{descriptor.location} is left alone"
                )
            descriptor.check_place(settings.cache_uri(), *task)
        except SpecError as err:  # forged, or damaged: its row goes, and nothing it names is touched
            log.warning("%s", err)
            return
        if descriptor.in_memory:
            memory.release_copy(descriptor)
            return
        log.info("deleting the files of the cache copy %s", descriptor.location)
        storage.remove(descriptor.location)


def other_backend() -> type[BaseXCom]:
    """The backend of every value that is not the registry's: ``[spark_tables] other_xcom_backend``, else Airflow's
    own; ``SpecError`` in one line when the setting names no XCom backend this one can hand values to."""
    path = settings.other_xcom_backend()
    if path is None:
        return BaseXCom
    module_name, _, class_name = path.rpartition(".")
    try:
        backend = getattr(importlib.import_module(module_name), class_name) if module_name else None
    except ImportError as err:
        raise SpecError(
            f"[spark_tables] other_xcom_backend {path!r} cannot be imported ({err}): name an XCom backend class by "
            "its full path, with its provider installed"
        ) from None
    if not (isinstance(backend, type) and issubclass(backend, BaseXCom)) or issubclass(
        backend, CacheRegistryXComBackend
    ):
        raise SpecError(
            f"[spark_tables] other_xcom_backend {path!r} is not another XCom backend: name a subclass of "
            "airflow.sdk.BaseXCom other than this one, such as "
            "airflow.providers.common.io.xcom.backend.XComObjectStorageBackend, or leave it unset"
        )
    return backend


#: The XCom being deleted, while ``delete`` runs: (dag_id, run_id, task_id, map_index).
_deleting: ContextVar[tuple[str, str, str, int | None] | None] = ContextVar("spark_tables_xcom_deleting", default=None)


@contextlib.contextmanager
def deleting(dag_id: str, run_id: str, task_id: str, map_index: int | None) -> Iterator[None]:
    """While an XCom is deleted: whose it is, for ``purge`` to check a descriptor's copy against."""
    token = _deleting.set((dag_id, run_id, task_id, map_index))
    try:
        yield
    finally:
        _deleting.reset(token)
