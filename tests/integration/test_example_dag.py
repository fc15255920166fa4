"""The example DAG through `airflow dags test`, read back by a separate Spark application."""

from __future__ import annotations

import os

import psycopg
import pytest

from spark_tables.core.catalog_config import PostgresMetastore
from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, ExampleRun, dags_test

pytestmark = pytest.mark.integration

DS = "2026-11-20"


@pytest.mark.parametrize("name", ["embedded", "postgres", "in_session"])
def test_example_dag_writes_tables_that_outlive_its_applications(name: str, request: pytest.FixtureRequest) -> None:
    """Per-job on the embedded default and on a PostgreSQL metastore, and in session mode on a Spark Connect server."""
    deployment = request.getfixturevalue(name)
    run = dags_test(deployment, "example_spark_sql", DS)
    check_example_sql(run)
    modes = {run.xcoms[task]["mode"] for task in ("load_orders", "summarise")}
    assert modes == {"session" if name == "in_session" else "per-job"}


def check_example_sql(run: ExampleRun) -> None:
    """What the example's run (for ``DS``) did."""
    deployment = run.deployment
    loaded = run.xcoms["load_orders"]
    assert loaded["tables_written"] == ["demo.orders"]
    assert loaded["row_counts"] == {"demo.orders": 10000}
    summary = run.xcoms["summarise"]
    assert summary["tables_written"] == ["demo.daily_totals"]
    assert summary["columns"] == ["customer", "orders", "total"]
    assert [row[0] for row in summary["rows"]] == [f"customer_{n}" for n in range(7)]
    assert sum(row[1] for row in summary["rows"]) == 10000

    [[orders, amount, customers, total]] = deployment.read_back(
        f"SELECT (SELECT count(*) FROM demo.orders WHERE ds = '{DS}'),"
        f" (SELECT CAST(sum(amount) AS STRING) FROM demo.orders WHERE ds = '{DS}'),"
        f" (SELECT count(*) FROM demo.daily_totals WHERE ds = '{DS}'),"
        f" (SELECT CAST(sum(total) AS STRING) FROM demo.daily_totals WHERE ds = '{DS}')"
    )
    assert (orders, customers) == (10000, 7)
    assert amount == total

    if isinstance(deployment.catalog, PostgresMetastore):
        with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=deployment.catalog.database) as conn:
            tables = {row[0] for row in conn.execute('SELECT "TBL_NAME" FROM "TBLS"')}
        assert {"orders", "daily_totals"} <= tables, "the tables must be in the PostgreSQL metastore"

    exchange = run.home / "exchange"
    assert not exchange.exists() or os.listdir(exchange) == [], "job results must be removed once read"
