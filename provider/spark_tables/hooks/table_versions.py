"""A table's version read from the Airflow side, without Spark: its format's log at its location, through Airflow's
object storage (a listing and one small file), as the job's side reads it with fsspec (``core.table_format``)."""

from __future__ import annotations

from spark_tables.core.errors import SpecError
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.core.table_format.format import TableFormat
from spark_tables.core.table_format.formats import TABLE_FORMATS
from spark_tables.core.table_format.version import TableVersion
from spark_tables.hooks.object_storage import storage_path


def _list_names(folder: str) -> list[str]:
    try:
        return sorted(entry.name for entry in storage_path(folder).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _read_text(location: str) -> str:
    return storage_path(location).read_text()


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
