"""The Airflow side of lookup joins: the connection a lookup table reads, the jobs its operators build, the
reload sensor's deferral, and a spec carrying a password kept off the command line."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.providers.common.compat.sdk import AirflowFailException, TaskDeferred
from airflow.providers.standard.triggers.temporal import DateTimeTrigger

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import result_uri, spec_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.lookup.snapshot import POINTER, FailedReloads, Pointer, Snapshot
from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.xcom_keys import RELOAD_DUE
from spark_tables.hooks.job_exchange import write_private_file
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.hooks.spark_job import SparkJobHook
from spark_tables.operators.lookup import SparkLookupJoinOperator, SparkLookupReloadOperator
from spark_tables.sensors.lookup_reload import LookupReloadSensor
from tests.unit.task_context import task_context

pytestmark = pytest.mark.usefixtures("spark_tables_home")

PERIODIC = {
    "lookup.cache": "FULL",
    "lookup.full-cache.periodic-reload.interval": "1 h",
    "lookup.full-cache.periodic-reload.schedule-mode": "FIXED_RATE",
}


def _table(**fields: Any) -> LookupTable:
    values = {"name": "customers", "conn_id": "crm", "table": "crm.customers", "key": ("id",), "options": PERIODIC}
    return LookupTable(**{**values, **fields})


@pytest.fixture
def crm(set_connection: Any, tmp_path: Path) -> Path:
    jar = tmp_path / "postgresql.jar"
    jar.write_bytes(b"jar")
    set_connection(
        "crm",
        conn_type="postgres",
        host="db.internal",
        port=6432,
        schema="crm",
        login="reader",
        password="s3cret",
        extra={"jdbc-driver-jar": str(jar)},
    )
    return jar


class TestLookupTableHook:
    def test_a_postgres_connection_becomes_the_jobs_source(self, crm: Path) -> None:
        source = LookupTableHook(_table(columns=("name",))).source_table()

        assert source.kind == "postgres" and source.table == "crm.customers" and source.key == ("id",)
        assert source.columns == ("name",)
        assert source.connection == {
            "connect_timeout": 10,
            "host": "db.internal",
            "port": 6432,
            "dbname": "crm",
            "user": "reader",
            "password": "s3cret",
        }
        assert "s3cret" not in repr(source) and "s3cret" not in repr(LookupTableHook(_table()).spec())

    def test_a_missing_connection_is_one_line_naming_it(self) -> None:
        with pytest.raises(SpecError, match=r"lookup table customers: connection 'crm' does not exist: create it"):
            LookupTableHook(_table()).source_table()

    def test_a_connection_of_another_type_is_refused(self, set_connection: Any) -> None:
        set_connection("crm", conn_type="mysql", host="h", schema="s")

        with pytest.raises(SpecError, match=r"connection 'crm' is of type 'mysql': it must be a postgres connection"):
            LookupTableHook(_table()).source_table()

    def test_the_jdbc_driver_comes_from_the_connection_and_must_exist(self, crm: Path, set_connection: Any) -> None:
        assert LookupTableHook(_table()).jdbc_driver_jar() == str(crm)
        set_connection("crm", conn_type="postgres", host="h", schema="s", extra={"jdbc-driver-jar": "/no/such.jar"})

        with pytest.raises(SpecError) as raised:
            LookupTableHook(_table()).jdbc_driver_jar()
        assert str(raised.value) == (
            "PostgreSQL JDBC driver not found at /no/such.jar: fetch the jars jvm/pom.xml declares (scripts/setup.sh "
            "does; docs/configuration.md#jvm-jars), or set the extra 'jdbc-driver-jar' of connection 'crm' to a jar's "
            "path or URL"
        )

    def test_the_jdbc_driver_defaults_to_the_declared_jar(self, set_connection: Any) -> None:
        set_connection("crm", conn_type="postgres", host="h", schema="s")
        fetched = os.path.join(sys.prefix, "share", "spark-tables", "jars", "postgresql.jar")  # by scripts/setup.sh
        assert LookupTableHook(_table()).jdbc_driver_jar() == fetched

    def test_the_pointer_is_read_from_the_lookup_root(self, crm: Path, spark_tables_home: Path) -> None:
        hook = LookupTableHook(_table())
        assert hook.pointer() == Pointer(current=None)
        pointer = Path(hook.snapshots().removeprefix("file://")) / POINTER
        pointer.parent.mkdir(parents=True)
        written = _pointer(pendulum.datetime(2026, 11, 22, 10), loads=4, load_failures=1)
        current = dataclasses.replace(written.current, location=f"{hook.snapshots()}/{written.current.version}")
        written = dataclasses.replace(written, current=current)
        pointer.write_text(json.dumps(written.to_dict()))

        assert hook.pointer() == written


class TestSnapshotsKeyedByWhatTheyHold:
    def test_two_dags_tables_of_one_name_on_other_databases_keep_snapshots_of_their_own(
        self, set_connection: Any
    ) -> None:
        """One name, two sources: one root would share a snapshot, and a join would read the other DAG's rows."""
        set_connection("crm_eu", conn_type="postgres", host="eu.db", schema="crm", login="r", password="p1")
        set_connection("crm_us", conn_type="postgres", host="us.db", schema="crm", login="r", password="p2")
        set_connection("crm_eu_again", conn_type="postgres", host="eu.db", schema="crm", login="other", password="p3")
        roots = {
            conn_id: LookupTableHook(LookupTable(name="customers", conn_id=conn_id, table="c", key=("id",))).snapshots()
            for conn_id in ("crm_eu", "crm_us", "crm_eu_again")
        }
        assert roots["crm_eu"] != roots["crm_us"]
        assert roots["crm_eu"] == roots["crm_eu_again"], "the same rows, whoever reads them: one snapshot"
        other_columns = LookupTable(name="customers", conn_id="crm_eu", table="c", key=("id",), columns=("x",))
        assert LookupTableHook(other_columns).snapshots() != roots["crm_eu"]
        assert all("p1" not in root and "p2" not in root for root in roots.values())


class TestOperators:
    def test_a_join_job_carries_the_tasks_options_over_the_tables(self, crm: Path) -> None:
        operator = SparkLookupJoinOperator(
            task_id="t",
            lookup=_table(),
            lookup_options={"lookup.cache": "PARTIAL", "lookup.partial-cache.max-rows": "100"},
            probe="SELECT * FROM orders",
            on="customer_id",
            output_table="enriched",
        )

        job = operator.build_job(task_context())

        assert job.lookup.lookup_options.cache == "PARTIAL" and job.lookup.lookup_options.max_rows == 100
        assert job.lookup.lookup_options.reload_interval == pendulum.duration(hours=1)  # the table's own, kept
        assert job.on == ("customer_id",) and job.output == "enriched"
        assert job.metrics_uri.endswith(".metrics") and "/lookup/customers-" in job.lookup.snapshots
        assert operator.job_jars(job) == [str(crm)]

    @pytest.mark.parametrize(("cache", "lookup_root"), [("NONE", False), ("PARTIAL", False), ("FULL", True)])
    def test_a_join_shares_the_exchange_with_its_executors_and_the_lookup_root_when_full(
        self, crm: Path, spark_tables_home: Path, cache: str, lookup_root: bool
    ) -> None:
        """The executors leave their metrics in the exchange; a FULL join reads the snapshot there."""
        options = {"lookup.cache": cache, "lookup.partial-cache.max-rows": "100"}
        operator = SparkLookupJoinOperator(
            task_id="t", lookup=_table(), lookup_options=options, probe="SELECT 1 AS id", on="id"
        )

        folders = operator.shared_folders(operator.build_job(task_context()), ())

        expected = {"[spark_tables] exchange_uri": f"file://{spark_tables_home}/exchange"}
        if lookup_root:
            expected["[spark_tables] lookup_uri"] = f"file://{spark_tables_home}/lookup"
        assert folders == expected

    def test_a_streaming_join_shares_its_checkpoint_and_a_reload_the_lookup_root(
        self, crm: Path, spark_tables_home: Path
    ) -> None:
        stream = {"format": "json", "path": "/in", "schema": "id INT"}
        operator = SparkLookupJoinOperator(
            task_id="t", lookup=_table(), probe_stream=stream, on="id", output_table="o", checkpoint="file:///c"
        )
        assert operator.shared_folders(operator.build_job(task_context()), ())["checkpoint"] == "file:///c"

        reload = SparkLookupReloadOperator(task_id="t", lookup=_table())
        assert reload.shared_folders(reload.build_job(task_context()), ()) == {
            "[spark_tables] lookup_uri": f"file://{spark_tables_home}/lookup"
        }

    def test_a_joins_xcom_names_the_tables_definition_for_the_monitoring_pages(self, crm: Path) -> None:
        operator = SparkLookupJoinOperator(
            task_id="t",
            lookup=_table(columns=("name",)),
            lookup_options={"lookup.cache": "NONE"},
            probe="SELECT 1",
            on="id",
        )
        output = {"lookup": "customers", "cache": "NONE", "rows": 3, "output": None, "batches": 1, "metrics": {}}

        value = operator.xcom_value(JobResult(kind="lookup_join", output=output))

        # the task's cache mode is no part of it: a DAG's joins of one table through each cache are one table
        assert value["lookup_definition"] == "crm.customers on connection crm, key id, columns name"
        assert "s3cret" not in json.dumps(value)

    def test_a_bad_option_of_the_task_fails_before_any_job_with_one_line(self, crm: Path) -> None:
        operator = SparkLookupJoinOperator(
            task_id="t",
            lookup=_table(),
            lookup_options={"lookup.partial-cache.expire-after-access": "ten minutes"},
            probe="SELECT 1 AS id",
            on="id",
        )

        with pytest.raises(
            SpecError, match=r"lookup.partial-cache.expire-after-access='ten minutes' is not a duration"
        ):
            operator.build_job(task_context())

    def test_a_reload_refuses_a_table_whose_cache_is_not_full(self, crm: Path) -> None:
        operator = SparkLookupReloadOperator(task_id="t", lookup=_table(), lookup_options={"lookup.cache": "NONE"})

        with pytest.raises(SpecError, match=r"lookup.cache=NONE: only a FULL cache is reloaded"):
            operator.build_job(task_context())

    @pytest.mark.parametrize("scheduled_for", ["None", "tomorrow", "2026-11-22", "2026-11-22T10:00:00", "10:00"])
    def test_a_reload_time_that_is_no_instant_fails_before_any_job(self, crm: Path, scheduled_for: str) -> None:
        """It would be published into the table's pointer, where every reload sensor of the table counts from it."""
        operator = SparkLookupReloadOperator(task_id="t", lookup=_table(), scheduled_for=scheduled_for)
        with pytest.raises(SpecError) as caught:
            operator.build_job(task_context())
        assert str(caught.value) == (
            f"lookup reload: scheduled_for={scheduled_for!r} is not an ISO-8601 date and time with its offset: pass "
            "the reload sensor's XCom as it is (its 'due'), or leave it out for a manual load"
        )

    def test_a_reload_job_carries_the_time_it_was_scheduled_for(self, crm: Path) -> None:
        operator = SparkLookupReloadOperator(
            task_id="t", lookup=_table(), scheduled_for="2026-11-22T10:00:00+00:00", num_partitions=4
        )

        job = operator.build_job(task_context())

        assert job.scheduled_for == "2026-11-22T10:00:00+00:00" and job.num_partitions == 4 and job.retained == 2


class TestReloadSensor:
    def test_a_table_never_loaded_is_due_at_once(self, crm: Path) -> None:
        due = LookupReloadSensor(task_id="wait", lookup=_table()).execute(task_context())

        assert pendulum.parse(due) <= pendulum.now("UTC")

    def test_it_defers_to_a_trigger_at_the_next_reload_time(self, crm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        started = pendulum.now("UTC").subtract(minutes=10)
        monkeypatch.setattr(LookupTableHook, "pointer", lambda self: _pointer(started))
        sensor = LookupReloadSensor(task_id="wait", lookup=_table(), deferrable=True, timeout=3600 * 5)

        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(task_context())

        assert deferred.value.timeout == 3600 * 5, "the deferral ends with the sensor's timeout"
        trigger = deferred.value.trigger
        assert isinstance(trigger, DateTimeTrigger)
        assert trigger.moment == started.add(hours=1)  # FIXED_RATE: an hour after the last load started
        assert deferred.value.method_name == "execute_complete"
        monkeypatch.setattr(pendulum, "now", lambda tz=None: trigger.moment)  # the trigger fires at its moment
        assert (
            sensor.execute_complete(task_context(), event=None, **deferred.value.kwargs) == trigger.moment.isoformat()
        )

    def test_a_timed_reload_defers_to_the_wall_clock_time_across_a_dst_change(
        self, crm: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AIRFLOW__CORE__DEFAULT_TIMEZONE", "Europe/Berlin")
        scheduled_for = pendulum.datetime(2026, 3, 28, 10, 0, tz="Europe/Berlin")  # CET, +01:00
        last = _pointer(scheduled_for, minutes=3, scheduled_for=scheduled_for)
        monkeypatch.setattr(LookupTableHook, "pointer", lambda self: last)
        timed = {"lookup.cache": "FULL", "lookup.full-cache.reload-strategy": "TIMED"}
        sensor = LookupReloadSensor(
            task_id="wait",
            lookup=_table(options={**timed, "lookup.full-cache.timed-reload.iso-time": "10:00"}),
            deferrable=True,
        )

        evening = pendulum.datetime(2026, 3, 28, 18, 0, tz="UTC")
        monkeypatch.setattr(pendulum, "now", lambda tz=None: evening)
        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(task_context())

        # the next day at 10:00 on Berlin's wall clock, which is CEST (+02:00) by then: 23 hours after the last one
        assert deferred.value.trigger.moment == pendulum.datetime(2026, 3, 29, 8, 0, tz="UTC")
        assert deferred.value.trigger.moment - scheduled_for == pendulum.duration(hours=23)

    @pytest.mark.parametrize(("setting", "defers"), [(None, False), ("true", True), ("false", False)])
    def test_deferring_follows_operators_default_deferrable(
        self, crm: Path, monkeypatch: pytest.MonkeyPatch, setting: str | None, defers: bool
    ) -> None:
        if setting is None:
            monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
        else:
            monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", setting)

        assert LookupReloadSensor(task_id="wait", lookup=_table()).deferrable is defers

    def test_a_sensor_that_does_not_defer_pokes(self, crm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        started = pendulum.now("UTC").subtract(minutes=10)
        monkeypatch.setattr(LookupTableHook, "pointer", lambda self: _pointer(started))
        sensor = LookupReloadSensor(task_id="wait", lookup=_table(), deferrable=False)

        poked = sensor.poke(task_context())

        assert poked.is_done is False and poked.xcom_value == started.add(hours=1).isoformat()

    def test_after_failed_reloads_it_backs_off_and_says_so(
        self, crm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        started = pendulum.now("UTC").subtract(hours=3)  # FIXED_RATE, 1 h: the reload was due, and it failed
        failed_at = pendulum.now("UTC").subtract(seconds=5)
        failing = FailedReloads(
            count=3,
            started=failed_at.subtract(seconds=9).isoformat(),
            finished=failed_at.isoformat(),
            error="relation crm.customers does not exist",
        )
        monkeypatch.setattr(LookupTableHook, "pointer", lambda self: _pointer(started, failing=failing))
        sensor = LookupReloadSensor(task_id="wait", lookup=_table(), deferrable=True, failure_backoff="30 s")

        context = task_context()
        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(context)

        assert deferred.value.trigger.moment == failed_at.add(minutes=2)  # 30 s, doubled for each further failure
        assert context["ti"].pushed[RELOAD_DUE] == {
            "lookup": "customers",
            "due": failed_at.add(minutes=2).isoformat(),
            "failing": 3,
            "table_version": None,
        }, "the overview's next reload due, left before the sensor defers"
        log = capsys.readouterr().out
        assert "3 load(s) failed in a row" in log and "relation crm.customers does not exist" in log
        assert f"the next attempt is due at {failed_at.add(minutes=2).isoformat()}" in log

    def test_a_first_load_that_failed_is_not_tried_again_at_once(
        self, crm: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        failed_at = pendulum.now("UTC")
        failing = FailedReloads(
            count=1, started=failed_at.isoformat(), finished=failed_at.isoformat(), error="connection refused"
        )
        monkeypatch.setattr(
            LookupTableHook, "pointer", lambda self: Pointer(current=None, load_failures=1, failing=failing)
        )
        sensor = LookupReloadSensor(task_id="wait", lookup=_table(), deferrable=False)

        poked = sensor.poke(task_context())

        assert poked.is_done is False and poked.xcom_value == failed_at.add(minutes=1).isoformat()

    @pytest.mark.parametrize(
        ("backoff", "message"),
        [("0 s", r"failure_backoff is zero"), ("soon", r"failure_backoff='soon' is not a duration")],
    )
    def test_a_bad_failure_backoff_fails_the_dag_with_one_line(self, crm: Path, backoff: str, message: str) -> None:
        with pytest.raises(SpecError, match=message):
            LookupReloadSensor(task_id="wait", lookup=_table(), failure_backoff=backoff)

    def test_a_table_that_is_not_full_fails_the_sensor_with_one_line(self, crm: Path) -> None:
        sensor = LookupReloadSensor(task_id="wait", lookup=_table(), lookup_options={"lookup.cache": "NONE"})

        with pytest.raises(AirflowFailException, match=r"reloads are for lookup.cache=FULL"):
            sensor.execute(task_context())


def _pointer(
    started: pendulum.DateTime,
    *,
    minutes: int = 7,
    scheduled_for: pendulum.DateTime | None = None,
    failing: FailedReloads | None = None,
    **counters: int,
) -> Pointer:
    """A pointer to a snapshot whose load started at ``started`` and took ``minutes``."""
    snapshot = Snapshot(
        version="v-20261122T100000000000-0a0b0c0d",
        location="file:///x",
        rows=3,
        bytes=10,
        started=started.isoformat(),
        finished=started.add(minutes=minutes).isoformat(),
        load_milliseconds=minutes * 60_000,
        scheduled_for=scheduled_for.isoformat() if scheduled_for is not None else None,
    )
    return Pointer(current=snapshot, failing=failing, **counters)


def test_a_spec_carrying_a_password_goes_through_a_file_only_its_owner_reads(
    crm: Path, spark_tables_home: Path, no_process: None
) -> None:
    operator = SparkLookupJoinOperator(task_id="t", lookup=_table(), probe="SELECT 1 AS id", on="id")
    job = operator.build_job(task_context())
    ti = task_context()["ti"]
    uri = result_uri(
        (spark_tables_home / "exchange").as_uri(),
        **{field: getattr(ti, field) for field in ("dag_id", "run_id", "task_id", "map_index", "try_number")},
    )
    hook = SparkJobHook(spec=JobSpec(job=job, result_uri=uri), catalog=EmbeddedCatalog(home=str(spark_tables_home)))

    assert JobSpec(job=job, result_uri=uri).carries_credentials
    assert hook.application_args == [f"@{spec_uri(uri)}"]
    assert "s3cret" not in " ".join(hook.submit_command("entry.py"))
    spec_path, spec_json = hook._spec_file
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    write_private_file(spec_path, spec_json)
    local = spec_path.path
    assert stat.S_IMODE(os.stat(local).st_mode) == 0o600 and "s3cret" in Path(local).read_text()
