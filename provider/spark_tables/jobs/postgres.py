"""The one way jobs reach PostgreSQL: psycopg connections, pools of async ones, and Spark's JDBC reader, all from
the connection arguments the Airflow side built with ``PostgresHook`` (``core/postgres.py``).

Lookup sources, plan sinks and aggregation sinks connect through here, so every extra the hook passes on
(``sslmode``, ``sslrootcert``, ``options``, ...) reaches every connection a job opens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from pyspark.sql import DataFrameReader, SparkSession

from spark_tables.core.errors import one_line
from spark_tables.core.postgres import SECRET_KEYWORDS, jdbc_properties, jdbc_url

JDBC_DRIVER = "org.postgresql.Driver"


def connect(
    args: Mapping[str, Any], *, autocommit: bool, prepare_threshold: int | None = 5, connect_timeout: int | None = None
) -> psycopg.Connection:
    """A psycopg connection; ``connect_timeout`` applies unless the connection's own extras set one."""
    return psycopg.connect(**_libpq(args, connect_timeout), autocommit=autocommit, prepare_threshold=prepare_threshold)


async def open_async_pool(args: Mapping[str, Any], *, size: int, timeout: float) -> AsyncConnectionPool:
    """An open pool of ``size`` autocommitted async connections in the running event loop (its connections belong
    to that loop), all connected before it returns; a broken one is replaced, and a caller waits up to ``timeout``
    seconds for a free one.

    One connection is made first, outside the pool: a connection that cannot be made fails at once with its own
    error, where the pool would retry it in the background until ``timeout``. The pool never grows nor shrinks, so
    no connection attempt is left pending between lookups: one would hold up the end of ``asyncio.run``'s loop."""
    kwargs = {**_libpq(args, None), "autocommit": True, "prepare_threshold": 0}
    await (await psycopg.AsyncConnection.connect(**kwargs)).close()
    pool = AsyncConnectionPool(kwargs=kwargs, min_size=size, max_size=size, timeout=timeout, open=False)
    await pool.open(wait=True, timeout=timeout)
    return pool


#: Spark's setting of what to hide in the strings it shows. A Spark Connect server's UI (its Connect tab) and event log
#: show each operation's plan as text, and a JDBC read's plan holds its options, the password among them (seen on
#: Spark 4.2, 2026-11-28): a session that reads through JDBC hides every option whose name says it is a secret.
STRING_REDACTION = "spark.sql.redaction.string.regex"
SECRET_OPTIONS = r'(?i)key: "[^"]*(?:password|secret|token)[^"]*"\s+value: "[^"]*"'


def jdbc_reader(spark: SparkSession, args: Mapping[str, Any]) -> DataFrameReader:
    """Spark's JDBC reader on the database, with pgjdbc's counterparts of the connection's extras; the session hides
    the secret ones wherever it shows a plan (``SECRET_OPTIONS``)."""
    hidden = spark.conf.get(STRING_REDACTION, None)
    if not hidden or SECRET_OPTIONS not in hidden:
        spark.conf.set(STRING_REDACTION, f"(?:{hidden})|{SECRET_OPTIONS}" if hidden else SECRET_OPTIONS)
    reader = spark.read.format("jdbc").option("url", jdbc_url(args)).option("driver", JDBC_DRIVER)
    for name, value in jdbc_properties(args).items():
        reader = reader.option(name, value)
    return reader


def safe_line(error: BaseException, args: Mapping[str, Any]) -> str:
    """The error's one line, with any secret of the arguments masked, should a server ever echo it."""
    line = one_line(error)
    for keyword in SECRET_KEYWORDS:
        secret = args.get(keyword)
        if secret:
            line = line.replace(str(secret), "***")
    return line


@contextlib.contextmanager
def advisory_lock(args: Mapping[str, Any], resource: str, while_waiting: Callable[[], None]) -> Iterator[bool]:
    """Hold a session-level advisory lock named ``resource`` in the database for the block, on a connection of its
    own, so that it holds across hosts and is released when the block ends or the connection drops (its holder
    died); yields whether another held it first, calling ``while_waiting`` (which may raise) between tries."""
    key = "hashtextextended(%s, 0)"
    with connect(args, autocommit=True, prepare_threshold=0) as connection:
        waited = False
        while not connection.execute(f"SELECT pg_try_advisory_lock({key})", (resource,)).fetchone()[0]:
            waited = True
            while_waiting()
        try:
            yield waited
        finally:
            connection.execute(f"SELECT pg_advisory_unlock({key})", (resource,))


def _libpq(args: Mapping[str, Any], connect_timeout: int | None) -> dict[str, Any]:
    defaults = {"connect_timeout": connect_timeout} if connect_timeout is not None else {}
    return {**defaults, **args}
