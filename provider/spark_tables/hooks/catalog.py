"""The catalog connection: which metastore and warehouse the Spark jobs use."""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook

from spark_tables.core.catalog_config import Catalog, EmbeddedCatalog, PostgresMetastore
from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from spark_tables.core.table_format.formats import DEFAULT_TABLE_FORMATS
from spark_tables.hooks.postgres import connect_args
from spark_tables.utils import settings


class SparkTablesCatalogHook(BaseHook):
    """Resolves a ``spark_tables`` connection into a catalog.

    No connection, or one without a host: the embedded Derby catalog under ``home`` (extra) or
    ``[spark_tables] home``. With a host: a PostgreSQL metastore database (schema = database name, the connection
    arguments as ``PostgresHook`` builds them: ``hooks/postgres.py``) and the ``warehouse`` extra. Either loads the
    table formats of the ``table-formats`` extra (none unless it names them), and makes a table without ``USING`` in
    the format of the ``default-format`` extra (Spark's, parquet, unless it names one).
    """

    conn_name_attr = "catalog_conn_id"
    default_conn_name = "spark_tables_default"
    conn_type = "spark_tables"
    hook_name = "Spark Tables catalog"

    def __init__(self, catalog_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.catalog_conn_id = catalog_conn_id

    def get_conn(self) -> Catalog:
        return self.get_catalog()

    def get_catalog(self) -> Catalog:
        try:
            conn = self.get_connection(self.catalog_conn_id)
        except AirflowNotFoundException:
            if self.catalog_conn_id != self.default_conn_name:
                raise SpecError(
                    f"catalog connection {self.catalog_conn_id!r} does not exist: create it (type spark_tables) "
                    f"or leave catalog_conn_id unset to use the embedded catalog"
                ) from None
            return EmbeddedCatalog(home=settings.home())
        extra = conn.extra_dejson
        formats, default_format = self._table_formats(extra), self._default_format(extra)
        if not conn.host:
            return EmbeddedCatalog(
                home=extra.get("home") or settings.home(), table_formats=formats, default_format=default_format
            )
        args = connect_args(conn, f"catalog connection {self.catalog_conn_id!r}")
        return PostgresMetastore(
            host=args.pop("host"),
            port=args.pop("port"),
            database=args.pop("dbname", ""),
            user=args.pop("user", "postgres"),
            password=args.pop("password", ""),
            warehouse=extra.get("warehouse", ""),
            jdbc_driver_jar=extra.get("jdbc-driver-jar", POSTGRES_JDBC_DRIVER),
            parameters=args,
            table_formats=formats,
            default_format=default_format,
        )

    def _table_formats(self, extra: dict[str, Any]) -> tuple[str, ...]:
        """The extra ``table-formats``: a list of format names (``[]`` for none, as when it is absent)."""
        formats = extra.get("table-formats", DEFAULT_TABLE_FORMATS)
        if not isinstance(formats, list | tuple) or not all(isinstance(name, str) for name in formats):
            raise SpecError(
                f"catalog connection {self.catalog_conn_id!r}: extra 'table-formats' must be a list of format names, "
                f'such as ["delta"], or [] for none'
            )
        return tuple(formats)

    def _default_format(self, extra: dict[str, Any]) -> str | None:
        """The extra ``default-format``: the format of a table made without ``USING`` (absent: Spark's, parquet)."""
        default_format = extra.get("default-format")
        if default_format is not None and not isinstance(default_format, str):
            raise SpecError(
                f"catalog connection {self.catalog_conn_id!r}: extra 'default-format' must be a format's name, such "
                'as "delta"'
            )
        return default_format.lower() if default_format else None
