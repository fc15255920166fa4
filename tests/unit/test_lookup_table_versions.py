"""Lookup tables of the catalog and their versions, on the Airflow side: a Delta table's version read from its log
as files (Delta's documented protocol, written here as Delta writes it), the snapshot that records the version it
holds, the reload that finds the table unchanged and runs no Spark job, and the sensor that waits for a new version
(at each reload time, or ON_CHANGE in the triggerer). Delta's own writes of those files are tested in
tests/integration/test_delta_lookups.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred
from airflow.providers.standard.triggers.temporal import DateTimeTrigger

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.options import LookupOptions
from spark_tables.core.lookup.snapshot import POINTER, Pointer, Snapshot
from spark_tables.core.lookup.table import LookupSpec, LookupTable, SourceTable
from spark_tables.core.table_format import delta_log
from spark_tables.core.table_format.delta import DELTA
from spark_tables.core.table_format.version import TableVersion
from spark_tables.core.xcom_keys import RELOAD_DUE
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.hooks.table_versions import current_version
from spark_tables.operators.lookup import SparkLookupJoinOperator, SparkLookupReloadOperator
from spark_tables.sensors.lookup_reload import LookupReloadSensor
from spark_tables.tasks.lookup.reload_schedule import LastLoad, next_check, next_reload
from spark_tables.triggers.table_version import TableVersionTrigger
from tests.unit.task_context import task_context

pytestmark = pytest.mark.usefixtures("spark_tables_home")

HOURLY = {"lookup.full-cache.reload-strategy": "PERIODIC", "lookup.full-cache.periodic-reload.interval": "1 h"}


def _commit(table: Path, version: int, txn_id: str, operation: str = "WRITE") -> None:
    """One commit file of a Delta table's log, as Delta writes it: a JSON action a line, ``commitInfo`` among them."""
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    actions = [
        {"commitInfo": {"timestamp": 1700000000000 + version, "operation": operation, "txnId": txn_id}},
        {"add": {"path": f"part-{version}.parquet", "size": 10, "dataChange": True}},
    ]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in actions))


def _delta_table(tmp_path: Path, commits: int = 1) -> Path:
    table = tmp_path / "warehouse" / "dims.db" / "customers"
    for version in range(commits):
        _commit(table, version, f"txn-{version}")
    return table


def _held(table: Path, number: int) -> TableVersion:
    return TableVersion(format="delta", location=f"file:{table}", number=number, commit=f"txn-{number}")


def _lookup(**options: Any) -> LookupTable:
    return LookupTable.in_catalog(name="customers", table="dims.customers", key=("id",), options=options)


def _publish(hook: LookupTableHook, held: TableVersion | None, started: pendulum.DateTime | None = None) -> Pointer:
    """A pointer on the lookup root, as a load publishes it, to a snapshot holding ``held``."""
    started = started or pendulum.now("UTC").subtract(minutes=5)
    root = hook.snapshots()
    version = "v-20261201T100000000000-0a0b0c0d"
    snapshot = Snapshot(
        version=version,
        location=f"{root}/{version}",
        rows=10,
        bytes=100,
        started=started.isoformat(),
        finished=started.add(seconds=3).isoformat(),
        load_milliseconds=3000,
        table_version=held,
    )
    pointer = Pointer(current=snapshot, loads=1)
    folder = Path(root.removeprefix("file://"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / POINTER).write_text(json.dumps(pointer.to_dict()))
    return pointer


class TestDeltaLog:
    def test_the_version_is_the_newest_commit_s_number_and_id(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path, commits=3)
        (table / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"")  # Delta's other files
        (table / "_delta_log" / "_last_checkpoint").write_text("{}")

        assert current_version(_held(table, 0)) == _held(table, 2)
        assert DELTA.version(f"file:{table}", lambda folder: [], lambda file: "") is None, "no log: no table"

    def test_a_table_made_anew_at_its_location_is_another_version_of_the_same_number(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path)
        held = current_version(_held(table, 0))
        _commit(table, 0, "txn-of-the-new-table")  # dropped and made again: its log starts again at 0

        now = current_version(held)
        assert now is not None and now.number == held.number == 0
        assert now != held, "the commit's id tells them apart"

    def test_a_commit_without_delta_s_txn_id_is_told_by_its_time_and_operation(self) -> None:
        made = delta_log.parse_commit(4, json.dumps({"commitInfo": {"timestamp": 17, "operation": "MERGE"}}))
        assert made.id == "17:MERGE"

    def test_a_table_gone_has_no_version(self, tmp_path: Path) -> None:
        assert current_version(_held(tmp_path / "gone", 3)) is None

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ({"format": "delta", "location": "/t", "number": -1, "commit": "c"}, "is not a whole number"),
            ({"format": "delta", "location": "", "number": 1, "commit": "c"}, "must be non-empty text"),
            ({"format": "delta", "number": 1}, "must be an object with commit, format, location, number"),
        ],
    )
    def test_a_recorded_version_of_the_wrong_shape_is_refused(self, data: dict[str, Any], message: str) -> None:
        with pytest.raises(SpecError, match=message):
            TableVersion.from_dict(data, "pointer")


class TestCatalogLookupTables:
    def test_a_catalog_table_is_full_and_reloads_on_change_unless_told(self) -> None:
        lookup = _lookup()
        options = lookup.lookup_options
        assert (lookup.source, lookup.conn_id) == ("catalog", "spark_tables_default")
        assert (options.cache, options.reload_strategy) == ("FULL", "ON_CHANGE")
        assert lookup.definition() == "dims.customers in catalog spark_tables_default, key id"
        assert _lookup(**HOURLY).lookup_options.reload_strategy == "PERIODIC"

    @pytest.mark.parametrize("cache", ["NONE", "PARTIAL"])
    def test_a_catalog_table_has_no_cache_per_key(self, cache: str) -> None:
        with pytest.raises(SpecError, match=rf"lookup.cache={cache} is not for a catalog table.*set lookup.cache=FULL"):
            _lookup(**{"lookup.cache": cache, "lookup.partial-cache.max-rows": "10"})
        with pytest.raises(SpecError, match="is not for a catalog table"):
            _lookup().with_options({"lookup.cache": cache, "lookup.partial-cache.max-rows": "10"})

    def test_a_postgres_table_has_no_versions_to_reload_on(self) -> None:
        with pytest.raises(SpecError, match=r"ON_CHANGE needs a table with versions.*PostgreSQL table has none"):
            LookupTable(
                name="c",
                conn_id="crm",
                table="crm.customers",
                key=("id",),
                options={"lookup.cache": "FULL", "lookup.full-cache.reload-strategy": "ON_CHANGE"},
            )
        with pytest.raises(SpecError, match="ON_CHANGE needs a table with versions"):
            LookupSpec(
                name="c",
                source=SourceTable(kind="postgres", connection={}, table="t", key=("id",)),
                options={"lookup.cache": "FULL", "lookup.full-cache.reload-strategy": "ON_CHANGE"},
                snapshots="/s",
            )

    def test_a_bad_catalog_table_name_fails_naming_the_lookup_table(self) -> None:
        with pytest.raises(SpecError, match=r"lookup table customers: invalid table identifier 'dims\.'"):
            LookupTable.in_catalog(name="customers", table="dims.", key=("id",))

    def test_the_embedded_catalog_s_table_locks_in_its_home_and_names_its_snapshots_by_it(
        self, spark_tables_home: Path
    ) -> None:
        source = LookupTableHook(_lookup()).source_table()
        assert (source.kind, source.connection, source.table) == (
            "catalog",
            {"home": str(spark_tables_home)},
            "dims.customers",
        )
        assert source.holds()["home"] == str(spark_tables_home)
        assert LookupTableHook(_lookup()).jdbc_driver_jar() is None, "Spark reads it as its catalog's own"

    def test_a_metastore_catalog_s_table_locks_in_the_metastore_database(self, set_connection: Any) -> None:
        set_connection(
            "lake",
            conn_type="spark_tables",
            host="metastore.internal",
            schema="hive",
            login="hive",
            password="s3cret",
            extra={"warehouse": "s3a://lake/warehouse"},
        )
        lookup = LookupTable.in_catalog(name="c", table="dims.c", key=("id",), catalog_conn_id="lake")
        source = LookupTableHook(lookup).source_table()
        assert source.connection["host"] == "metastore.internal" and source.connection["dbname"] == "hive"
        assert "s3cret" not in repr(source), "the password reaches the job in its private spec file only"

    def test_a_task_on_another_catalog_than_its_lookup_table_s_is_refused(self, nothing_is_started: None) -> None:
        operator = SparkLookupJoinOperator(
            task_id="t", lookup=_lookup(), probe="SELECT 1 AS id", on="id", catalog_conn_id="other"
        )
        with pytest.raises(
            AirflowFailException, match=r"is a table of catalog 'spark_tables_default'.*catalog_conn_id"
        ):
            operator.execute(task_context())


class TestSchedule:
    def test_on_change_is_due_from_the_last_load_s_end_and_the_version_decides(self) -> None:
        started = pendulum.datetime(2026, 12, 1, 10, tz="UTC")
        last = LastLoad(started=started, finished=started.add(seconds=30))
        options = LookupOptions(cache="FULL", reload_strategy="ON_CHANGE")

        assert next_reload(options, last, now=started.add(hours=5), timezone="UTC") == started.add(seconds=30)
        with pytest.raises(SpecError, match="ON_CHANGE has no reload times"):
            next_check(options, started, timezone="UTC")

    def test_after_an_unchanged_reload_time_the_next_one_is_an_interval_or_a_day_on(self) -> None:
        unchanged = pendulum.datetime(2026, 3, 28, 9, tz="UTC")  # 10:00 in Berlin, CET
        hourly = LookupOptions(cache="FULL", reload_interval="1 h", schedule_mode="FIXED_RATE")
        daily = LookupOptions(cache="FULL", reload_strategy="TIMED", reload_time="10:00")

        assert next_check(hourly, unchanged, timezone="UTC") == unchanged.add(hours=1)
        # the next day at 10:00 on Berlin's wall clock, CEST by then
        assert next_check(daily, unchanged, timezone="Europe/Berlin") == pendulum.datetime(2026, 3, 29, 8, tz="UTC")


class TestUnchangedReload:
    def test_a_reload_of_an_unchanged_table_runs_no_spark_job_and_says_so(
        self, tmp_path: Path, nothing_is_started: None
    ) -> None:
        table = _delta_table(tmp_path, commits=2)
        operator = SparkLookupReloadOperator(task_id="reload", lookup=_lookup())
        pointer = _publish(operator.lookup_hook, _held(table, 1))

        xcom = operator.execute(task_context())

        assert (xcom["loaded"], xcom["unchanged"], xcom["attempts"], xcom["application_id"]) == (False, True, 0, None)
        assert xcom["snapshot"]["version"] == pointer.current.version
        assert xcom["snapshot"]["table_version"] == _held(table, 1).to_dict()
        assert xcom["metrics"]["loadCount"] == 1 and xcom["loads"] == 1, "no load counted"

    def test_a_reload_of_a_changed_table_runs_its_job(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path, commits=2)
        operator = SparkLookupReloadOperator(task_id="reload", lookup=_lookup())
        _publish(operator.lookup_hook, _held(table, 0))

        assert operator.result_without_job(operator.build_job(task_context())) is None

    def test_a_table_without_versions_is_reloaded_by_its_job(self, tmp_path: Path) -> None:
        operator = SparkLookupReloadOperator(task_id="reload", lookup=_lookup(**HOURLY))
        _publish(operator.lookup_hook, None)

        assert operator.result_without_job(operator.build_job(task_context())) is None


class TestSensor:
    def test_an_unchanged_table_at_its_reload_time_waits_for_the_next_one(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path)
        sensor = LookupReloadSensor(task_id="wait", lookup=_lookup(**HOURLY), deferrable=True)
        started = pendulum.now("UTC").subtract(hours=2)
        _publish(LookupTableHook(sensor.lookup), _held(table, 0), started=started)

        context = task_context()
        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(context)

        due = started.add(seconds=3).add(hours=1)  # FIXED_DELAY, from the load's end: passed, and nothing changed
        assert isinstance(deferred.value.trigger, DateTimeTrigger)
        assert deferred.value.trigger.moment == due.add(hours=1)
        assert deferred.value.kwargs == {"checked": due.isoformat()}
        assert context["ti"].pushed[RELOAD_DUE]["due"] == due.add(hours=1).isoformat()

        _commit(table, 1, "txn-1")  # the table changes before the next reload time
        resumed = pendulum.now("UTC")
        with pytest.raises(TaskDeferred) as again:  # the time has not come yet: it waits on
            sensor.execute_complete(task_context(), **deferred.value.kwargs)
        assert again.value.trigger.moment == due.add(hours=1) and resumed < due.add(hours=1)

    def test_a_changed_table_is_due_at_its_reload_time(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path, commits=2)
        sensor = LookupReloadSensor(task_id="wait", lookup=_lookup(**HOURLY), deferrable=True)
        started = pendulum.now("UTC").subtract(hours=2)
        _publish(LookupTableHook(sensor.lookup), _held(table, 0), started=started)

        assert sensor.execute(task_context()) == started.add(seconds=3).add(hours=1).isoformat()

    def test_on_change_an_unchanged_table_is_watched_in_the_triggerer_until_it_changes(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path)
        sensor = LookupReloadSensor(task_id="wait", lookup=_lookup(), deferrable=True, poke_interval=7)
        _publish(LookupTableHook(sensor.lookup), _held(table, 0))

        context = task_context()
        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(context)

        trigger = deferred.value.trigger
        assert isinstance(trigger, TableVersionTrigger)
        assert context["ti"].pushed[RELOAD_DUE] == {
            "lookup": "customers",
            "due": None,
            "failing": 0,
            "table_version": 0,
        }
        classpath, kwargs = trigger.serialize()
        assert classpath == "spark_tables.triggers.table_version.TableVersionTrigger"
        assert kwargs == {"held": _held(table, 0).to_dict(), "poll_seconds": 7.0}

        _commit(table, 1, "txn-1")
        watching = TableVersionTrigger(**{**kwargs, "poll_seconds": 0.0})  # as the triggerer makes it again
        event = asyncio.run(anext(watching.run()))
        assert event.payload == {"version": _held(table, 1).to_dict()}
        due = sensor.execute_complete(task_context(), event=event.payload)
        assert pendulum.parse(due) <= pendulum.now("UTC")

    def test_poking_looks_at_the_version_at_each_poke(self, tmp_path: Path) -> None:
        table = _delta_table(tmp_path)
        sensor = LookupReloadSensor(task_id="wait", lookup=_lookup(), deferrable=False)
        _publish(LookupTableHook(sensor.lookup), _held(table, 0))

        assert sensor.poke(task_context()).is_done is False
        _commit(table, 1, "txn-1")
        assert sensor.poke(task_context()).is_done is True

    def test_on_change_needs_a_snapshot_with_a_version(self, tmp_path: Path) -> None:
        sensor = LookupReloadSensor(task_id="wait", lookup=_lookup(), deferrable=True)
        _publish(LookupTableHook(sensor.lookup), None)

        with pytest.raises(AirflowFailException, match=r"holds no table version: dims\.customers has none"):
            sensor.execute(task_context())
