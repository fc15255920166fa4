"""Creates the Hive metastore schema in PostgreSQL up front, once, with DataNucleus's own SchemaTool.

Letting DataNucleus create it lazily (``datanucleus.schema.autoCreateAll``) deadlocked the first CTAS on
PostgreSQL: one connection sat idle in transaction while another waited to add a foreign key. The schema check
connects with the catalog's connection arguments, which ``SparkTablesCatalogHook`` builds with ``PostgresHook``
(its extras such as ``sslmode`` or ``options`` included).
"""

from __future__ import annotations

import glob
import logging
import os
import subprocess
import tempfile
import zipfile

import psycopg

from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.utils.local_spark import java_binary, postgres_jdbc_driver, spark_jars_dir

log = logging.getLogger(__name__)

#: pg_advisory_lock key held while one task creates the schema, so parallel first tasks wait for it.
SCHEMA_LOCK_KEY = 0x5A7AB1E5


class MetastoreUnavailable(RuntimeError):
    """The PostgreSQL metastore cannot be reached or prepared; the message is one line."""


def ensure_metastore_schema(catalog: PostgresMetastore) -> None:
    postgres_jdbc_driver(catalog.jdbc_driver_jar, "the catalog connection's extra 'jdbc-driver-jar'")
    try:
        with psycopg.connect(**{"connect_timeout": 10, **catalog.connect_args()}, autocommit=True) as conn:
            if _schema_exists(conn):
                return
            conn.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
            try:
                if not _schema_exists(conn):
                    _run_schema_tool(catalog)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
    except psycopg.Error as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise MetastoreUnavailable(
            f"cannot reach the PostgreSQL metastore {catalog.host}:{catalog.port}/{catalog.database} ({first}): "
            "check the catalog connection and that the database exists"
        ) from None


def _schema_exists(conn: psycopg.Connection) -> bool:
    row = conn.execute("""SELECT to_regclass('public."TBLS"') IS NOT NULL""").fetchone()
    return bool(row and row[0])


def _run_schema_tool(catalog: PostgresMetastore) -> None:
    jars = spark_jars_dir()
    metastore_jars = glob.glob(os.path.join(jars, "hive-metastore-*.jar"))
    if not metastore_jars:
        raise MetastoreUnavailable(f"no hive-metastore jar in {jars}: the Spark installation lacks Hive support")
    log.info("creating the Hive metastore schema in %s with DataNucleus SchemaTool", catalog.describe())
    with tempfile.TemporaryDirectory(prefix="spark-tables-schema-") as work:
        with zipfile.ZipFile(metastore_jars[0]) as jar:
            jar.extract("package.jdo", work)
        props = os.path.join(work, "metastore.properties")
        with open(os.open(props, os.O_WRONLY | os.O_CREAT, 0o600), "w", encoding="utf-8") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in catalog.metastore_properties().items())
        command = [
            java_binary(),
            "-cp",
            f"{jars}/*:{catalog.jdbc_driver_jar}",
            "org.datanucleus.store.schema.SchemaTool",
            "-create",
            "-api",
            "JDO",
            "-props",
            props,
            os.path.join(work, "package.jdo"),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or "completed successfully" not in done.stdout:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
        raise MetastoreUnavailable(f"SchemaTool could not create the metastore schema: {tail}")
    log.info("metastore schema created")
