"""Page views for the streaming aggregation tests: a JSON-file table ``views`` read one file a micro-batch, and the
PostgreSQL schema its results are upserted into (the ``views`` fixture, in conftest, makes both)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from spark_tables.core.streaming.sinks import PostgresUpsertSink
from tests.spark.postgres import run_sql

#: The test schema, one per pytest-xdist worker: the ``views`` fixture drops and creates it around each test.
PG_SCHEMA = "aggregation_spark_tests" + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""
)
#: A processing time on a whole minute, for the buffer's clock.
T0 = 1_800_000_000_000
#: The modification time of a views folder's first file, in epoch seconds; each next file's is a second later.
FILES_FROM = 1_700_000_000
#: Two runs' files of views (name, views): three micro-batches that change home three times and docs twice, then one
#: that adds blog and changes home.
TWO_RUNS = [
    [
        ("a", [("home", "u1", 120, "2026-01-01 00:00:01"), ("docs", "u2", 300, "2026-01-01 00:00:02")]),
        ("b", [("home", "u2", 80, "2026-01-01 00:00:03"), ("home", "u1", 95, "2026-01-01 00:00:04")]),
        ("c", [("home", "u3", 410, "2026-01-01 00:00:05"), ("docs", "u2", 150, "2026-01-01 00:00:06")]),
    ],
    [("d", [("blog", "u4", 60, "2026-01-01 00:00:07"), ("home", "u4", 70, "2026-01-01 00:00:08")])],
]


def add_views(folder: Path, name: str, *views: tuple[str, str, int, str]) -> None:
    """A file ``name`` of page views (page, user, ms, ts): one micro-batch, after the folder's earlier files (the
    file source takes them by modification time, which two files written at once may share)."""
    lines = [json.dumps({"page": page, "user": user, "ms": ms, "ts": ts}) for page, user, ms, ts in views]
    path = folder / f"{name}.json"
    path.write_text("\n".join(lines) + "\n")
    modified = FILES_FROM + len(list(folder.iterdir()))
    os.utime(path, (modified, modified))


def pg_sink(table: str, columns: str, key: tuple[str, ...] = ("page",)) -> PostgresUpsertSink:
    """The sink of table ``table`` in the test schema, created with ``columns``."""
    run_sql(f"CREATE TABLE IF NOT EXISTS {PG_SCHEMA}.{table} ({columns})")
    return PostgresUpsertSink(name=table, conn_id="pg", table=f"{PG_SCHEMA}.{table}", key=key)


def pg_table(name: str) -> list[tuple]:
    """The table's rows, sorted, floating-point values to 9 places: Spark adds a stream's partial sums in another
    order than a batch's."""
    return sorted(map(rounded, run_sql(f"SELECT * FROM {PG_SCHEMA}.{name}")))


def rounded(row: Any) -> tuple:
    return tuple(round(value, 9) if isinstance(value, float) else value for value in row)


def lose_commit(checkpoint: Path, batch_id: int) -> None:
    """Delete a micro-batch's commit from a query's checkpoint (with its checksum), as when the driver died after
    the batch's sink and before its commit: the next run runs the batch again."""
    (checkpoint / "commits" / str(batch_id)).unlink()
    (checkpoint / "commits" / f".{batch_id}.crc").unlink(missing_ok=True)
