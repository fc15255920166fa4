"""Lookup tables: dimension tables that lookup joins read by key (FLIP-221), in an external database or in the
jobs' own catalog.

A DAG author declares one with ``LookupTable``: the Airflow connection of the database, the table, its lookup
key and the FLIP's ``lookup.*`` options; or with ``LookupTable.in_catalog`` a table of the catalog the jobs run on (a
Delta table, whose versions its full cache follows). The Airflow side resolves the connection into a
``SourceTable`` (what a Spark job needs to reach the table, with no Airflow in it) and hands the job a
``LookupSpec``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier, checked_columns, checked_plain_name
from spark_tables.core.lookup.options import CacheMode, LookupOptions, ReloadStrategy

#: ``table`` or ``schema.table`` in the external database, unquoted names.
_SOURCE_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*(?:\.[A-Za-z_][A-Za-z0-9_$]*)?")
#: Where a lookup table lives: a PostgreSQL database (``conn_id`` a postgres connection), or the catalog the jobs run
#: on (``conn_id`` that catalog's connection, type spark_tables).
POSTGRES = "postgres"
CATALOG = "catalog"
SOURCES = (POSTGRES, CATALOG)
#: The catalog connection's name when a task names none (``SparkTablesCatalogHook.default_conn_name``).
DEFAULT_CATALOG_CONN_ID = "spark_tables_default"


@dataclass(frozen=True)
class LookupTable:
    """A dimension table that lookup joins read by ``key``, declared once and shared by a DAG's tasks.

    :param name: names the table's full-cache snapshots and its metrics (letters, digits, underscores).
    :param conn_id: Airflow connection of the database (type postgres); of a catalog table, the catalog's.
    :param table: ``table`` or ``schema.table`` in that database; ``table`` or ``database.table`` in the catalog.
    :param key: the lookup key columns, in the order the probe side's join columns are matched to them.
    :param columns: the columns a lookup returns; empty: every column but the key.
    :param options: the FLIP's ``lookup.*`` options (``lookup.cache``, ``lookup.partial-cache.max-rows``, ...).
    :param source: ``postgres``, or ``catalog`` for a table of the jobs' catalog (``in_catalog`` says it plainly).
    """

    name: str
    conn_id: str
    table: str
    key: Sequence[str]
    columns: Sequence[str] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    source: str = POSTGRES

    @classmethod
    def in_catalog(
        cls,
        name: str,
        table: str,
        key: Sequence[str],
        columns: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
        catalog_conn_id: str = DEFAULT_CATALOG_CONN_ID,
    ) -> LookupTable:
        """A table of the catalog the lookup's jobs run on (``catalog_conn_id``, the embedded one by default): a Delta
        table, or one of Spark's file formats. Its full cache (the only cache a catalog table has) copies one version
        of it, and by default reloads when that version changes (``ON_CHANGE``)."""
        defaults = {"lookup.cache": "FULL", "lookup.full-cache.reload-strategy": "ON_CHANGE"}
        return cls(
            name=name,
            conn_id=catalog_conn_id,
            table=table,
            key=key,
            columns=columns,
            options={**defaults, **(options or {})},
            source=CATALOG,
        )

    def __post_init__(self) -> None:
        checked_plain_name(self.name, "lookup table")
        if self.source not in SOURCES:
            raise SpecError(f"lookup table {self.name}: source {self.source!r} is invalid: use one of {list(SOURCES)}")
        if not isinstance(self.conn_id, str) or not self.conn_id:
            raise SpecError(f"lookup table {self.name}: conn_id must name an Airflow connection of the database")
        if self.source == CATALOG:
            try:
                TableIdentifier.parse(self.table)
            except SpecError as err:
                raise SpecError(f"lookup table {self.name}: {err}") from None
        elif not isinstance(self.table, str) or not _SOURCE_TABLE.fullmatch(self.table):
            raise SpecError(f"lookup table {self.name}: table {self.table!r} is invalid: use table or schema.table")
        key = checked_columns(self.key, f"lookup table {self.name}: key", required=True)
        columns = checked_columns(self.columns, f"lookup table {self.name}: columns", required=False)
        if set(key) & set(columns):
            raise SpecError(f"lookup table {self.name}: columns repeat key column(s) {sorted(set(key) & set(columns))}")
        options = LookupOptions.from_options(self.options)
        check_source_options(self.source, options, f"lookup table {self.name} ({self.table})")
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "options", dict(options.to_options()))

    @property
    def lookup_options(self) -> LookupOptions:
        return LookupOptions.from_options(self.options)

    def definition(self) -> str:
        """Where its rows come from, for people (the monitoring pages group a DAG's lookups by it): the table, its
        connection, key and columns; not the options, which each task may set over the table's own."""
        columns = f", columns {', '.join(self.columns)}" if self.columns else ""
        where = f"in catalog {self.conn_id}" if self.source == CATALOG else f"on connection {self.conn_id}"
        return f"{self.table} {where}, key {', '.join(self.key)}{columns}"

    def with_options(self, overrides: Mapping[str, Any] | None) -> LookupTable:
        """The same table with a task's ``lookup.*`` options over its own."""
        if not overrides:
            return self
        return dataclasses.replace(self, options=self.lookup_options.merged(overrides).to_options())


def check_source_options(source: str, options: LookupOptions, what: str) -> None:
    """What a table's source allows of its options, in one line: a catalog table has a FULL cache only (its rows
    cannot be queried key by key from an executor); ``ON_CHANGE`` needs versions, which PostgreSQL tables lack."""
    if source == CATALOG and options.cache is not CacheMode.FULL:
        raise SpecError(
            f"{what}: lookup.cache={options.cache} is not for a catalog table, which is looked up through its full "
            "cache, a copy of one version of it: set lookup.cache=FULL"
        )
    if source == POSTGRES and options.cache is CacheMode.FULL and options.reload_strategy is ReloadStrategy.ON_CHANGE:
        raise SpecError(
            f"{what}: lookup.full-cache.reload-strategy=ON_CHANGE needs a table with versions (a Delta table of the "
            "catalog), and a PostgreSQL table has none: use PERIODIC or TIMED"
        )


@dataclass(frozen=True)
class SourceTable:
    """What a Spark job needs to read a lookup table: the source kind, its connection settings, table and key."""

    kind: str
    connection: dict[str, Any] = field(repr=False)  # with the password: no log line or error message shows it
    table: str
    key: tuple[str, ...]
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", tuple(self.key))
        object.__setattr__(self, "columns", tuple(self.columns))

    def holds(self) -> dict[str, Any]:
        """What a snapshot of this table holds, which names its snapshots: where the rows come from (server,
        database, table; a catalog's metastore server and database, or its home) and which (key, columns); no
        credential."""
        where = {name: self.connection.get(name) for name in ("host", "port", "dbname")}
        if "home" in self.connection:
            where["home"] = self.connection["home"]
        return {"kind": self.kind, **where, "table": self.table, "key": list(self.key), "columns": list(self.columns)}

    @classmethod
    def from_dict(cls, data: Any) -> SourceTable:
        if isinstance(data, SourceTable):
            return data
        if not isinstance(data, dict) or not {"kind", "connection", "table", "key"} <= set(data):
            raise SpecError("lookup job: source must be an object with kind, connection, table and key")
        return cls(**data)


@dataclass(frozen=True)
class LookupSpec:
    """A lookup table as a job reads it: its source, its options, and the root of its full-cache snapshots."""

    name: str
    source: SourceTable
    options: dict[str, str]
    snapshots: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "source", SourceTable.from_dict(self.source))
        options = LookupOptions.from_options(self.options)
        check_source_options(self.source.kind, options, f"lookup table {self.name} ({self.source.table})")
        object.__setattr__(self, "options", options.to_options())

    @property
    def lookup_options(self) -> LookupOptions:
        return LookupOptions.from_options(self.options)

    @classmethod
    def from_dict(cls, data: Any) -> LookupSpec:
        if isinstance(data, LookupSpec):
            return data
        if not isinstance(data, dict) or set(data) != {"name", "source", "options", "snapshots"}:
            raise SpecError("lookup job: lookup must be an object with name, source, options and snapshots")
        return cls(**data)
