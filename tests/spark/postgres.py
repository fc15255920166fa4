"""The PostgreSQL the spark-layer tests reach (scripts/test.sh starts it and creates spark_tables_test): connection
settings as the jobs take them."""

from __future__ import annotations

import os

import psycopg

PG = {
    "host": os.environ.get("SPARK_TABLES_TEST_PG_HOST", "127.0.0.1"),
    "port": int(os.environ.get("SPARK_TABLES_TEST_PG_PORT", "5432")),
    "dbname": "spark_tables_test",
    "user": os.environ.get("SPARK_TABLES_TEST_PG_USER", "postgres"),
}


def run_sql(*statements: str) -> list[tuple]:
    """Run ``statements`` in the test database, autocommitted; the rows of the last one that returns any."""
    with psycopg.connect(
        host=PG["host"], port=PG["port"], dbname=PG["dbname"], user=PG["user"], autocommit=True
    ) as connection:
        rows: list[tuple] = []
        for statement in statements:
            cursor = connection.execute(statement)
            rows = cursor.fetchall() if cursor.description else []
        return rows
