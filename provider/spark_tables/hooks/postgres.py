"""PostgreSQL connections as Spark jobs reach them: what lookup tables read, and plans and streaming aggregations
write their sinks through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.sinks import PostgresUpsertSink

#: Airflow connection types that name a PostgreSQL database.
POSTGRES_TYPES = ("postgres", "postgresql")


def postgres_connection(conn_id: str, what: str) -> Any:
    """The Airflow connection ``conn_id`` of ``what`` (a lookup table, a sink), checked to be PostgreSQL's."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise SpecError(
            f"{what}: connection {conn_id!r} does not exist: create it (type postgres: host, port, schema = "
            "database, login, password)"
        ) from None
    if (conn.conn_type or "") not in POSTGRES_TYPES:
        raise SpecError(
            f"{what}: connection {conn_id!r} is of type {conn.conn_type!r}: it must be a postgres connection"
        )
    if not conn.host or not conn.schema:
        raise SpecError(f"{what}: connection {conn_id!r} needs a host and a schema (the database name)")
    return conn


def connection_settings(conn: Any) -> dict[str, Any]:
    """``host``, ``port``, ``database``, ``user`` and, when set, ``password``: what the job's psycopg needs."""
    settings: dict[str, Any] = {
        "host": conn.host,
        "port": conn.port or 5432,
        "database": conn.schema,
        "user": conn.login,
    }
    if conn.password:
        settings["password"] = conn.password
    return settings


class PostgresSinkHook(BaseHook):
    """Resolves the Airflow connections of PostgreSQL upsert sinks into what a job's sink writer needs."""

    def sink_connections(self, sinks: Sequence[PostgresUpsertSink]) -> dict[str, dict[str, Any]]:
        """Each sink's connection settings, by sink name (with the password: the spec then goes to the driver in a
        file, never on a command line); ``SpecError`` naming the first sink whose connection is missing or wrong."""
        return {
            sink.name: connection_settings(postgres_connection(sink.conn_id, f"postgres sink {sink.name}"))
            for sink in sinks
        }
