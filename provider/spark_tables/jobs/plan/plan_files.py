"""Plan files, read and written by the driver through ``jobs.files``: paths, ``file://`` URIs and object storage
(``s3://`` and every scheme Airflow's ObjectStoragePath reaches; the driver needs the file system's package).
A plan the driver cannot reach is a ``SpecError``, as the plan's URI is the statement's."""

from __future__ import annotations

from spark_tables.core.errors import SpecError
from spark_tables.jobs import files


def plan_exists(uri: str) -> bool:
    try:
        return files.is_file(uri)
    except files.StorageUnreachable as err:
        raise SpecError(f"plan: {err}") from None


def read_plan_text(uri: str) -> str:
    """The plan file's text; ``SpecError`` naming the URI when there is none."""
    try:
        return files.read_text(uri)
    except FileNotFoundError:
        raise SpecError(f"plan {uri} does not exist: compile it first (COMPILE PLAN '{uri}' FOR ...)") from None
    except files.StorageUnreachable as err:
        raise SpecError(f"plan: {err}") from None


def write_plan_text(uri: str, text: str) -> None:
    """Write the whole plan at once, replacing any plan there."""
    try:
        files.write_text(uri, text)
    except files.StorageUnreachable as err:
        raise SpecError(f"plan: {err}") from None
