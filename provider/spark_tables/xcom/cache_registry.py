"""The cache-registry XCom backend: Airflow's own XCom, which also holds the registry of cached tables' copies.

Set ``[core] xcom_backend = spark_tables.xcom.cache_registry.CacheRegistryXComBackend``. A ``CacheDescriptor``
is stored as a tagged JSON object (readable as it is in the Airflow UI) and read back as a descriptor; purging
such an XCom deletes the copy's files, or releases a copy kept in a Spark Connect server's memory. Every other
value goes through Airflow's default serialization, as before.

Airflow runs an XCom backend only in task processes, and calls ``purge`` only when an XCom is deleted through
it: by this provider (invalidation, release, a damaged copy replaced) and when a cleared task runs again. Rows
removed by deleting a DAG run or ``airflow db clean`` are not purged; the release and sweep tasks remove the
folders of runs that have ended or no longer exist.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseXCom

from spark_tables.core.cache.descriptor import CacheDescriptor, is_descriptor
from spark_tables.hooks.cache import memory, storage

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
        return BaseXCom.serialize_value(
            value, key=key, task_id=task_id, dag_id=dag_id, run_id=run_id, map_index=map_index
        )

    @staticmethod
    def deserialize_value(result: Any) -> Any:
        if is_descriptor(result.value):
            return CacheDescriptor.from_dict(result.value)
        return BaseXCom.deserialize_value(result)

    @classmethod
    def purge(cls, xcom: Any, *args: Any) -> None:
        if is_descriptor(xcom.value):
            descriptor = CacheDescriptor.from_dict(xcom.value)
            if descriptor.in_memory:
                memory.release_copy(descriptor)
                return
            log.info("deleting the files of the cache copy %s", descriptor.location)
            storage.remove(descriptor.location)
