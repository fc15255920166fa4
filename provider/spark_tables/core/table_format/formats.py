"""The table formats a catalog can load, one line each, and those it loads unless its connection says otherwise.
Spark's own file formats (parquet, ORC, JSON, CSV) need nothing loaded and are not listed."""

from __future__ import annotations

from spark_tables.core.errors import SpecError
from spark_tables.core.table_format.delta import DELTA
from spark_tables.core.table_format.format import TableFormat

TABLE_FORMATS: dict[str, TableFormat] = {table_format.name: table_format for table_format in (DELTA,)}
#: Spark's own file formats, which every session reads and writes.
FILE_FORMATS = ("parquet", "orc", "json", "csv", "avro", "text")
#: None: a catalog loads a format when its connection asks (``table-formats``). Delta Lake's session catalog resolves
#: the tables it does not own through Spark's V1 path, where a table of a source that streams only through the V2 API
#: (``USING rate``) can no longer be read or described ("rate is not a valid Spark SQL Data Source").
DEFAULT_TABLE_FORMATS: tuple[str, ...] = ()


def table_formats(names: tuple[str, ...], setting: str) -> tuple[TableFormat, ...]:
    """The formats ``names`` names; an unknown name fails in one line naming ``setting`` and the known ones."""
    unknown = [name for name in names if name not in TABLE_FORMATS]
    if unknown:
        raise SpecError(
            f"{setting}: unknown table format {unknown[0]!r}: use {', '.join(sorted(TABLE_FORMATS))}, or none ([])"
        )
    return tuple(TABLE_FORMATS[name] for name in names)


def default_format_conf(default_format: str | None, loaded: tuple[str, ...], setting: str) -> dict[str, str]:
    """The session setting that makes ``default_format`` what a table without ``USING`` is made in (Spark's
    ``spark.sql.sources.default``; None leaves Spark's, parquet); a format the catalog does not load fails in one
    line naming ``setting``."""
    if default_format is None:
        return {}
    if default_format not in (*FILE_FORMATS, *loaded):
        if default_format in TABLE_FORMATS:
            raise SpecError(f"{setting}: {default_format} is not loaded by the catalog: add it to 'table-formats' too")
        raise SpecError(
            f"{setting}: unknown format {default_format!r}: use one of {', '.join((*FILE_FORMATS, *loaded))}"
        )
    return {"spark.sql.sources.default": default_format}


def formats_conf(formats: tuple[TableFormat, ...]) -> dict[str, str]:
    """The static settings that load ``formats`` in one session: their SQL extensions joined, the one session
    catalog (two formats that each need their own cannot share a session, and fail in one line)."""
    catalogs = {table_format.session_catalog for table_format in formats}
    if len(catalogs) > 1:
        raise SpecError(
            f"table formats {', '.join(f.name for f in formats)} each need their own session catalog: load one of them"
        )
    if not formats:
        return {}
    return {
        "spark.sql.extensions": ",".join(table_format.extensions for table_format in formats),
        "spark.sql.catalog.spark_catalog": catalogs.pop(),
    }
