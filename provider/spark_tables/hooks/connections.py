"""The Airflow connections jobs reach external systems through, looked up and checked to be of the right type."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook

from spark_tables.core.errors import SpecError


def typed_connection(conn_id: str, what: str, types: Sequence[str], to_create: str) -> Any:
    """The Airflow connection ``conn_id`` of ``what`` (a lookup table, a sink, a source), of one of ``types``;
    ``SpecError`` in one line when it is missing (``to_create`` says what to give it) or of another type."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise SpecError(f"{what}: connection {conn_id!r} does not exist: create it ({to_create})") from None
    if (conn.conn_type or "") not in types:
        raise SpecError(
            f"{what}: connection {conn_id!r} is of type {conn.conn_type!r}: it must be a {types[0]} connection"
        )
    return conn
