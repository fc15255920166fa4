"""The PostgreSQL the spark-layer tests reach (scripts/test.sh starts it and creates spark_tables_test): connection
settings as the jobs take them."""

from __future__ import annotations

import os

PG = {
    "host": os.environ.get("SPARK_TABLES_TEST_PG_HOST", "127.0.0.1"),
    "port": int(os.environ.get("SPARK_TABLES_TEST_PG_PORT", "5432")),
    "database": "spark_tables_test",
    "user": os.environ.get("SPARK_TABLES_TEST_PG_USER", "postgres"),
}
