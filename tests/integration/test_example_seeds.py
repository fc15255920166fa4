"""The examples that write to PostgreSQL share the schema ``spark_tables_demo``, and a user may trigger them at once
(from the UI, or as the cluster tests do): each seed task creates the schema if it is missing, in one transaction,
and none may fail because another seed is creating it at the same moment."""

from __future__ import annotations

import importlib.util
import threading
from types import ModuleType

import psycopg
import pytest

from tests.integration.airflow_services import wait_for
from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, REPO, _empty_database, demo_connection
from tests.integration.test_plan import _pg

pytestmark = pytest.mark.integration

#: A database of this test's own, emptied, and the examples' schema dropped there, before the seeds run.
DATABASE = "spark_tables_seed_test"
#: Each example's seed task: its module and the SQL of its ``SQLExecuteQueryOperator``.
SEEDS = {
    "example_spark_lookup": "SEED",
    "example_spark_plan": "SEED_SINKS",
    "example_spark_buffered_output": "SEED_SINKS",
}


def _example(dag_id: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(dag_id, REPO / "dags" / f"{dag_id}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _connect(**kwargs: bool) -> psycopg.Connection:
    return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=DATABASE, **kwargs)


@pytest.mark.parametrize("second", ["example_spark_lookup", "example_spark_buffered_output"])
def test_a_seed_waits_for_another_creating_the_schema_and_succeeds(
    monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    """The plan example's seed holds its transaction open, the schema created in it; the second seed runs as its
    operator runs it (the Postgres hook, one transaction), is seen waiting, and succeeds once the first commits."""
    from airflow.providers.postgres.hooks.postgres import PostgresHook

    _empty_database(DATABASE)
    _pg("DROP SCHEMA IF EXISTS spark_tables_demo CASCADE", DATABASE)
    plan, other = _example("example_spark_plan"), _example(second)
    monkeypatch.setenv(f"AIRFLOW_CONN_{other.CONN_ID.upper()}", demo_connection(DATABASE))
    errors: list[BaseException] = []

    def seed_other() -> None:
        try:
            PostgresHook(postgres_conn_id=other.CONN_ID).run(getattr(other, SEEDS[second]))
        except BaseException as err:  # the test reports it
            errors.append(err)

    with _connect() as first:
        for statement in getattr(plan, SEEDS["example_spark_plan"]):
            first.execute(statement)
        thread = threading.Thread(target=seed_other)
        thread.start()
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
        with _connect(autocommit=True) as watcher:
            wait_for(f"{second}'s seed to wait", lambda: watcher.execute(waiting, (DATABASE,)).fetchone()[0] == 1)
        first.commit()
    thread.join()
    assert errors == []
    tables = {row[0] for row in _pg("SELECT tablename FROM pg_tables WHERE schemaname = 'spark_tables_demo'", DATABASE)}
    assert {"shop_counts"} < tables and len(tables) == 1 + (3 if "buffered" in second else 1)
