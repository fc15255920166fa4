"""PostgreSQL connections as Spark jobs reach them: what lookup tables read, and plans and streaming aggregations
write their sinks through.

The connection arguments are the postgres provider's: ``connect_args`` gives what ``PostgresHook.get_conn`` hands
psycopg (host, port, dbname, user, password, AWS or Azure IAM tokens, and every connection extra the hook passes
on: ``sslmode``, ``sslrootcert``, ``options``, ``application_name``, ``keepalives_idle``, ...). They travel in the job
spec, which goes to the driver in a file only its owner reads (``SparkJobHook``), never on a command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from airflow.providers.common.compat.sdk import BaseHook
from airflow.providers.postgres.hooks.postgres import PostgresHook
from psycopg.conninfo import make_conninfo

from spark_tables.core.errors import SpecError
from spark_tables.core.postgres import DEFAULT_PORT
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.hooks.connections import typed_connection

#: Airflow connection types that name a PostgreSQL database.
POSTGRES_TYPES = ("postgres", "postgresql")
#: The extras this provider reads itself (the JDBC driver; a catalog connection's warehouse and home): never
#: connection arguments.
PROVIDER_EXTRAS = frozenset({"jdbc-driver-jar", "warehouse", "home", "table-formats", "default-format"})
#: Seconds a job waits for a PostgreSQL server to take a connection, unless the connection says otherwise.
CONNECT_TIMEOUT_SECONDS = 10


def postgres_connection(conn_id: str, what: str) -> Any:
    """The Airflow connection ``conn_id`` of ``what`` (a lookup table, a sink), checked to be PostgreSQL's."""
    conn = typed_connection(
        conn_id, what, POSTGRES_TYPES, "type postgres: host, port, schema = database, login, password"
    )
    if not conn.host or not conn.schema:
        raise SpecError(f"{what}: connection {conn_id!r} needs a host and a schema (the database name)")
    return conn


def connect_args(conn: Any, what: str) -> dict[str, Any]:
    """The psycopg (libpq) arguments ``PostgresHook.get_conn`` builds for ``conn``, less its ``cursor`` (jobs read
    plain rows) and this provider's own extras; ``port`` 5432 when the connection has none. Checked by libpq's own
    parser: an extra it does not know is a ``SpecError`` naming it.

    The hook has no public method giving these without connecting, so this is the one copy of its mapping, on its
    public parts (``ignored_extra_options``, ``get_iam_token``); ``test_postgres_connections.py`` holds it to the
    installed hook's ``get_conn``."""
    hook = PostgresHook(connection=conn)
    extra = conn.extra_dejson
    login, password, port = conn.login, conn.password, conn.port
    if extra.get("iam", False):
        login, password, port = hook.get_iam_token(conn)
    args: dict[str, Any] = {"host": conn.host, "user": login, "password": password, "dbname": conn.schema, "port": port}
    args.update(
        (name, value)
        for name, value in extra.items()
        if name not in hook.ignored_extra_options and name not in PROVIDER_EXTRAS
    )
    args = {name: value for name, value in args.items() if value is not None and value != ""}
    args.setdefault("port", DEFAULT_PORT)
    try:
        make_conninfo("", **args)
    except psycopg.ProgrammingError as err:
        reason = str(err).strip().splitlines()[0]
        raise SpecError(
            f"{what}: connection {conn.conn_id!r} has an extra PostgreSQL does not take ({reason}): remove it, or "
            "name a libpq connection parameter (sslmode, sslrootcert, options, ...)"
        ) from None
    return args


def job_connect_args(conn: Any, what: str) -> dict[str, Any]:
    """``connect_args`` for a job's lookups or sink writes, with libpq's ``connect_timeout`` (pgjdbc's
    ``connectTimeout``) ``CONNECT_TIMEOUT_SECONDS`` unless the connection's extra sets its own: an unreachable host
    fails in seconds, not after the system's TCP timeouts (minutes), and again for each of ``lookup.max-retries``."""
    return {"connect_timeout": CONNECT_TIMEOUT_SECONDS, **connect_args(conn, what)}


class PostgresSinkHook(BaseHook):
    """Resolves the Airflow connections of PostgreSQL upsert sinks into what a job's sink writer needs."""

    def sink_connections(self, sinks: Sequence[PostgresUpsertSink]) -> dict[str, dict[str, Any]]:
        """Each sink's connection arguments (``connect_args``), by sink name; ``SpecError`` naming the first sink
        whose connection is missing or wrong."""
        connections = {}
        for sink in sinks:
            what = f"postgres sink {sink.name}"
            connections[sink.name] = job_connect_args(postgres_connection(sink.conn_id, what), what)
        return connections
