"""A table's version read from the Airflow side, without Spark: its format's log at its location, through Airflow's
object storage (a listing and one small file), as the job's side reads it with fsspec (``core.table_format``)."""

from __future__ import annotations

from airflow.sdk import ObjectStoragePath

from spark_tables.core.errors import SpecError
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.core.table_format.format import TableFormat
from spark_tables.core.table_format.formats import TABLE_FORMATS
from spark_tables.core.table_format.version import TableVersion

#: Hadoop's names of object stores, as Spark reports a table's location, and fsspec's, which Airflow's storage takes.
_SCHEMES = {"s3a://": "s3://", "s3n://": "s3://"}


def _on_airflow(location: str) -> str:
    for hadoop, fsspec in _SCHEMES.items():
        if location.startswith(hadoop):
            return fsspec + location.removeprefix(hadoop)
    return location


def _list_names(folder: str) -> list[str]:
    try:
        return sorted(entry.name for entry in ObjectStoragePath(_on_airflow(folder)).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _read_text(location: str) -> str:
    return ObjectStoragePath(_on_airflow(location)).read_text()


def current_version(held: TableVersion) -> TableVersion | None:
    """The version the table of ``held`` (a version it had) is at now, by its format's log at its location; None
    when there is no table of that format there any more."""
    table_format = TABLE_FORMATS.get(held.format)
    if table_format is None:
        raise SpecError(f"table version of format {held.format!r}: unknown: use one of {sorted(TABLE_FORMATS)}")
    return _version_at(held.location, table_format)


@reached_by_airflow
def _version_at(location: str, table_format: TableFormat) -> TableVersion | None:
    return table_format.version(location, _list_names, _read_text)
