"""Lookup joins on a Delta dimension table of the catalog (FLIP-221's FULL cache): a snapshot copies one version of
the table and records it; a reload copies only a version it does not hold, which the Airflow side tells from the
table's log without Spark; a table made anew at its location is another version. The jobs run on the Spark Connect
server whose catalog loads Delta (``delta_server``) as session mode runs them, their spec built by the lookup
table's hook from a catalog connection naming that server's metastore (its loads lock in the metastore's database);
Hive-format parquet tables stay lookup tables, without versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.lookup.job import LookupJoinJob, LookupReloadJob
from spark_tables.core.lookup.table import LookupTable
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.jobs.entry import run_job
from spark_tables.operators.lookup import SparkLookupReloadOperator
from tests.unit.task_context import task_context

pytestmark = pytest.mark.integration


@pytest.fixture
def lake_catalog(delta_server: Any, spark_env: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The catalog connection of ``delta_server``'s metastore, as a deployment names it (type spark_tables)."""
    catalog = delta_server.catalog
    connection = {
        "conn_type": "spark_tables",
        "host": catalog.host,
        "port": catalog.port,
        "schema": catalog.database,
        "login": catalog.user,
        "password": catalog.password,
        "extra": {"warehouse": catalog.warehouse, "table-formats": ["delta"]},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    return "lake"


def _lookup(table: str, **options: str) -> LookupTable:
    return LookupTable.in_catalog(name="customers", table=table, key=("id",), options=options, catalog_conn_id="lake")


def _versions(hook: LookupTableHook) -> list[str]:
    root = Path(hook.snapshots().removeprefix("file://"))
    return sorted(path.name for path in root.iterdir() if path.name.startswith("v-"))


def test_a_full_cache_holds_one_version_and_a_reload_copies_only_a_new_one(
    lake: tuple[Any, str], lake_catalog: str, spark_env: Path
) -> None:
    spark, database = lake
    table = f"{database}.customers"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, concat('customer ', id) AS name FROM range(10)")
    hook = LookupTableHook(_lookup(table))
    spec = hook.spec()

    loaded = run_job(spark, LookupReloadJob(lookup=spec))

    assert loaded.succeeded, loaded.error
    held = loaded.output.snapshot["table_version"]
    assert (loaded.output.loaded, loaded.output.snapshot["rows"], held["format"], held["number"]) == (
        True,
        10,
        "delta",
        0,
    )
    assert held["location"].endswith(f"/{database}.db/customers")

    spark.sql(f"UPDATE {table} SET name = 'renamed' WHERE id = 1")  # version 1, which the snapshot does not hold
    joined = run_job(
        spark,
        LookupJoinJob(
            lookup=spec,
            on=("id",),
            metrics_uri=f"file://{spark_env}/metrics",
            probe="SELECT id FROM range(12)",
            output=f"{database}.enriched",
        ),
    )
    assert joined.succeeded, joined.error
    assert joined.output.table_version == held and joined.output.snapshot == loaded.output.snapshot["version"]
    names = dict(spark.sql(f"SELECT id, name FROM {database}.enriched").collect())
    assert (names[1], names[11], len(names)) == ("customer 1", None, 12), "the rows of version 0, all of them"

    pointer = hook.pointer()
    now = hook.version_now(pointer.current)
    assert now is not None and now.number == 1, "the Airflow side reads the new version from the log"
    operator = SparkLookupReloadOperator(task_id="reload", lookup=_lookup(table), catalog_conn_id=lake_catalog)
    assert operator.result_without_job(LookupReloadJob(lookup=spec)) is None, "changed: the job runs"

    reloaded = run_job(spark, LookupReloadJob(lookup=spec))
    assert reloaded.succeeded, reloaded.error
    assert (reloaded.output.loaded, reloaded.output.snapshot["table_version"]["number"]) == (True, 1)
    versions = _versions(hook)

    skipped = operator.result_without_job(LookupReloadJob(lookup=spec))
    assert skipped is not None and (skipped.output.unchanged, skipped.output.loaded) == (True, False)
    assert skipped.output.snapshot == reloaded.output.snapshot and skipped.application_id is None
    again = run_job(spark, LookupReloadJob(lookup=spec))  # the job's own check, under the table's lock
    assert again.succeeded, again.error
    assert (again.output.loaded, again.output.unchanged, again.output.loads) == (False, True, 2)
    assert _versions(hook) == versions, "nothing was written"
    xcom = operator.execute(task_context())
    assert (xcom["unchanged"], xcom["application_id"], xcom["snapshot"]["table_version"]["number"]) == (True, None, 1)


def test_a_table_made_anew_at_its_location_is_another_version(lake: tuple[Any, str], lake_catalog: str) -> None:
    spark, database = lake
    table = f"{database}.remade"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, 'old' AS name FROM range(3)")
    hook = LookupTableHook(_lookup(table))
    loaded = run_job(spark, LookupReloadJob(lookup=hook.spec()))
    assert loaded.succeeded, loaded.error

    spark.sql(f"DROP TABLE {table}")
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, 'new' AS name FROM range(5)")

    snapshot = hook.pointer().current
    now = hook.version_now(snapshot)
    assert now is not None and now.number == snapshot.table_version.number == 0
    assert now != snapshot.table_version, "the same number, another commit"
    reloaded = run_job(spark, LookupReloadJob(lookup=hook.spec()))
    assert reloaded.succeeded, reloaded.error
    assert (reloaded.output.loaded, reloaded.output.snapshot["rows"]) == (True, 5)


def test_a_parquet_table_has_no_versions_and_is_reloaded_on_a_schedule(
    lake: tuple[Any, str], lake_catalog: str
) -> None:
    spark, database = lake
    table = f"{database}.plain"
    spark.sql(f"CREATE TABLE {table} USING parquet AS SELECT id, 'x' AS name FROM range(4)")

    on_change = run_job(spark, LookupReloadJob(lookup=LookupTableHook(_lookup(table)).spec()))
    hourly = {"lookup.full-cache.reload-strategy": "PERIODIC", "lookup.full-cache.periodic-reload.interval": "1 h"}
    periodic = run_job(spark, LookupReloadJob(lookup=LookupTableHook(_lookup(table, **hourly)).spec()))

    assert on_change.error is not None
    assert "ON_CHANGE needs a table with versions" in on_change.error and "use PERIODIC or TIMED" in on_change.error
    assert on_change.output.snapshot is None, "nothing was published"
    assert periodic.succeeded, periodic.error
    assert periodic.output.snapshot["rows"] == 4 and periodic.output.snapshot["table_version"] is None


def test_a_reload_per_job_copies_the_version_and_takes_its_lock_in_the_metastore_s_database(
    lake: tuple[Any, str], lake_catalog: str, spark_env: Path, delta_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same reload through spark-submit, on the server's catalog (its PostgreSQL metastore): the driver reads the
    version from the table's log and takes the table's load lock in the metastore's database, whose password reaches
    it in the job spec's private file."""
    from spark_tables.core.job_spec import JobSpec
    from spark_tables.hooks.spark_connect_job import CONNECT_MODE_VARIABLE
    from spark_tables.hooks.spark_job import SparkJobHook

    spark, database = lake
    table = f"{database}.per_job"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, 'x' AS name FROM range(6)")
    spec = JobSpec(
        job=LookupReloadJob(lookup=LookupTableHook(_lookup(table)).spec()), result_uri=f"file://{spark_env}/r"
    )
    assert spec.carries_credentials

    with (
        monkeypatch.context() as classic
    ):  # while this process holds a Connect session (``lake``), as a task's would not
        classic.delenv(CONNECT_MODE_VARIABLE, raising=False)
        result = SparkJobHook(spec=spec, catalog=delta_server.catalog, name="delta-lookup-per-job").run()

    assert result.succeeded, result.error
    held = result.output.snapshot["table_version"]
    assert (result.output.loaded, result.output.snapshot["rows"], held["number"]) == (True, 6, 0)
    assert result.application_id.startswith("local-"), "its own application"
