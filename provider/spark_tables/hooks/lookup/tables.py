"""Lookup tables on the Airflow side: their database connections (or catalogs), their full-cache snapshots'
pointers, and whether the table a snapshot copied has changed since."""

from __future__ import annotations

import functools
import json
from typing import Any

from airflow.providers.common.compat.sdk import BaseHook

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from spark_tables.core.lookup.snapshot import POINTER, Pointer, Snapshot, snapshot_root
from spark_tables.core.lookup.table import CATALOG, LookupSpec, LookupTable, SourceTable
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.core.table_format.version import TableVersion
from spark_tables.hooks.catalog import SparkTablesCatalogHook
from spark_tables.hooks.object_storage import storage_path
from spark_tables.hooks.postgres import job_connect_args, postgres_connection
from spark_tables.hooks.table_versions import current_version
from spark_tables.utils import settings
from spark_tables.utils.local_spark import postgres_jdbc_driver


class LookupTableHook(BaseHook):
    """Resolves a lookup table's Airflow connection into what its Spark jobs need, and reads its snapshot pointer.

    The connection (type postgres) gives the connection arguments as ``PostgresHook`` builds them (host, port,
    database = schema, login, password and the extras it passes on: ``hooks/postgres.py``); its extra
    ``jdbc-driver-jar`` the JDBC driver full-cache reloads read with (default: the one ``jvm/pom.xml`` declares).
    A catalog table's connection is its catalog's (type spark_tables): the job locks its loads in the metastore's
    database, or in the embedded catalog's home.
    """

    def __init__(self, lookup: LookupTable, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lookup = lookup

    def get_conn(self) -> SourceTable:
        return self.source_table()

    @functools.cached_property
    def _connection(self) -> Any:
        return postgres_connection(self.lookup.conn_id, f"lookup table {self.lookup.name}")

    @functools.cached_property
    def _source_connection(self) -> dict[str, Any]:
        if self.lookup.source != CATALOG:
            return job_connect_args(self._connection, f"lookup table {self.lookup.name}")
        catalog = SparkTablesCatalogHook(catalog_conn_id=self.lookup.conn_id).get_catalog()
        return {"home": catalog.home} if isinstance(catalog, EmbeddedCatalog) else catalog.connect_args()

    def source_table(self) -> SourceTable:
        return SourceTable(
            kind=self.lookup.source,
            connection=self._source_connection,
            table=self.lookup.table,
            key=self.lookup.key,
            columns=self.lookup.columns,
        )

    def jdbc_driver_jar(self) -> str | None:
        """The JDBC driver for ``--jars``: a local file (checked here) or a URL Spark fetches; None for a catalog
        table, which Spark reads as its catalog's own."""
        if self.lookup.source == CATALOG:
            return None
        jar = self._connection.extra_dejson.get("jdbc-driver-jar") or POSTGRES_JDBC_DRIVER
        if "://" in jar:
            return jar
        return postgres_jdbc_driver(jar, f"the extra 'jdbc-driver-jar' of connection {self.lookup.conn_id!r}")

    def snapshots(self) -> str:
        return snapshot_root(settings.lookup_uri(), self.lookup.name, self.source_table().holds())

    def spec(self) -> LookupSpec:
        """The lookup table as a job reads it."""
        return LookupSpec(
            name=self.lookup.name,
            source=self.source_table(),
            options=dict(self.lookup.options),
            snapshots=self.snapshots(),
        )

    def pointer(self) -> Pointer:
        """The full cache's pointer: its current snapshot (None before its first load), counters and failures."""
        return _read_pointer(self.snapshots())

    def version_now(self, snapshot: Snapshot) -> TableVersion | None:
        """The version the table ``snapshot`` copied is at now, read from the table's log (no Spark, no read of its
        rows): the snapshot is current while this is its ``table_version``; None when the table is gone."""
        if snapshot.table_version is None:
            raise SpecError(
                f"lookup table {self.lookup.name}: snapshot {snapshot.version} holds no table version: "
                f"{self.lookup.table} has none (it is not a Delta table), so whether it changed cannot be told; use "
                "PERIODIC or TIMED"
            )
        return current_version(snapshot.table_version)


@reached_by_airflow
def _read_pointer(snapshots: str) -> Pointer:
    pointer = storage_path(snapshots) / POINTER
    if not pointer.exists():
        return Pointer(current=None)
    return Pointer.from_dict(json.loads(pointer.read_text()), snapshots)
