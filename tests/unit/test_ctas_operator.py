"""SparkCtasOperator: the job it builds, its claim, its callbacks, and what execute does with the job's outcome;
and the same for SparkSqlJobOperator's CTAS statements.

No Spark and no spark-submit: ``SparkJobHook.run`` is replaced by a fake that records each job it was given.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import pytest
import structlog.testing
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk.exceptions import AirflowTaskTimeout

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.durable_job import CallbackTime
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import cancel_uri, local_path
from spark_tables.core.job_result import JobResult
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.hooks.spark_job import SparkJobFailed, SparkJobHook
from spark_tables.operators.ctas import SparkCtasOperator
from spark_tables.operators.ctas_lifecycle import clean_up_after_lost_try, clean_up_before_retry
from spark_tables.operators.durable_jobs import stop_lost_driver
from spark_tables.operators.spark_job import SparkJobOperator
from spark_tables.operators.sql import SparkSqlJobOperator
from spark_tables.tasks.ctas import claims as ctas_claims
from spark_tables.tasks.ctas.claims import Claim, read_claim, write_claim

pytestmark = pytest.mark.usefixtures("spark_tables_home")

_RUN = "manual__2026-01-01T00:00:00+00:00"
_OWNER = TableOwner(dag_id="sales", run_id=_RUN, task_id="load", map_index=-1, try_number=1)
_CATALOG = "spark_tables_default"


def _context(states: dict[str, str | None] | None = None, **ti_fields: Any) -> dict[str, Any]:
    """A task context: the ti (who runs, and ``states`` of other tasks of this run by task id); what the task
    pushes to XCom lands in ``ti.pushed``, by key."""
    ti = {"dag_id": "sales", "run_id": _RUN, "task_id": "load", "map_index": -1, "try_number": 1, "stats_tags": {}}
    ti.update(ti_fields)
    pushed: dict[str, Any] = {}

    def get_task_states(dag_id, task_ids, run_ids, map_index):
        return {run_ids[0]: {t: (states or {})[t] for t in task_ids if t in (states or {})}}

    def xcom_push(key, value):
        pushed[key] = value

    return {"ti": SimpleNamespace(**ti, get_task_states=get_task_states, xcom_push=xcom_push, pushed=pushed)}


def _owner(**fields: Any) -> TableOwner:
    return dataclasses.replace(_OWNER, **fields)


def _operator(**arguments: Any) -> SparkCtasOperator:
    return SparkCtasOperator(**{"task_id": "load", **arguments})


@dataclasses.dataclass(frozen=True)
class _Raised:
    """An outcome: the job wrote ``result`` (or nothing), then ``run`` raised ``error``."""

    error: BaseException
    result: JobResult | None = None


class _Runs:
    """Replaces ``SparkJobHook.run``: records each job (and whether its claim existed), answers from ``outcomes``.

    An outcome is, by job kind, a JobResult to return, an exception to raise, or a ``_Raised``.
    """

    def __init__(self, outcomes: dict[str, JobResult | BaseException | _Raised]) -> None:
        self.outcomes = outcomes
        self.jobs: list[Any] = []
        self.result_uris: list[str] = []
        self.claims_during: list[Claim | None] = []

    @property
    def kinds(self) -> list[str]:
        return [job.kind for job in self.jobs]

    def __call__(self, hook: SparkJobHook) -> JobResult:
        job = hook._spec.job
        self.jobs.append(job)
        self.result_uris.append(hook._spec.result_uri)
        self.claims_during.append(read_claim(job.owner))
        outcome = self.outcomes[job.kind]
        if isinstance(outcome, BaseException):
            outcome = _Raised(outcome)
        if isinstance(outcome, _Raised):
            hook.last_result = outcome.result
            raise outcome.error
        hook.last_result = outcome
        return outcome


@pytest.fixture
def runs(monkeypatch, no_process):
    def install(**outcomes: JobResult | BaseException | _Raised) -> _Runs:
        fake = _Runs(outcomes)
        monkeypatch.setattr(SparkJobHook, "run", lambda hook: fake(hook))
        return fake

    return install


@pytest.fixture
def hooks_for(monkeypatch) -> list[tuple[Any, str]]:
    """Every (job, purpose) ``hook_for`` was called with, still building the real hook."""
    calls: list[tuple[Any, str]] = []
    real = SparkCtasOperator.hook_for

    def record(self, context, job, caches=(), purpose=""):
        calls.append((job, purpose))
        return real(self, context, job, caches, purpose)

    monkeypatch.setattr(SparkCtasOperator, "hook_for", record)
    return calls


#: The fields every ctas job's output has.
_CTAS = {"table": "db.t", "atomicity": "table"}


def _ctas_result(**output: Any) -> JobResult:
    return JobResult(
        kind="ctas",
        output={**_CTAS, "swept": [], **output},
        application_id="local-1",
        spark_version="4.2.0",
        session_seconds=1.5,
        work_seconds=2.5,
    )


def _cleanup_result(undone: list[str] | None = None) -> JobResult:
    output = {"tables": ["db.t"], "undone": ["dropped the unfinished db.t of try 1"] if undone is None else undone}
    return JobResult(kind="ctas_cleanup", output={**output, "cleaned_up": True}, application_id="local-2")


def _swept(owner: TableOwner, undone: list[str] | None, table: str = "db.other") -> dict[str, Any]:
    return {"tables": [table], "owner": dataclasses.asdict(owner), "undone": undone}


class TestBuildJob:
    def test_a_statement_gives_the_job(self):
        job = _operator(
            sql="CREATE TABLE db.t USING orc PARTITIONED BY (day) COMMENT 'daily' TBLPROPERTIES ('k' = 'v') "
            "AS SELECT 1 AS a, 2 AS day"
        ).build_job(_context())

        assert job == CtasJob(
            table="db.t",
            owner=_OWNER,
            query="SELECT 1 AS a, 2 AS day",
            format="orc",
            partitioned_by=("day",),
            comment="daily",
            properties={"k": "v"},
        )

    def test_a_replace_statement_gives_a_staging_replace(self):
        job = _operator(sql="CREATE OR REPLACE TABLE db.t AS SELECT 1").build_job(_context())

        assert job.replace is True
        assert job.if_not_exists is False
        assert job.with_format("parquet").atomicity == "staging"

    def test_parameters_give_the_job(self):
        job = _operator(
            table="cat.db.t",
            query="SELECT 1 AS a, 'x' AS region",
            format="json",
            partitioned_by=["region"],
            properties={"owner.team": "finance"},
            location="/data/t",
            comment="made by a test",
            atomicity="staging",
        ).build_job(_context())

        assert job == CtasJob(
            table="cat.db.t",
            owner=_OWNER,
            query="SELECT 1 AS a, 'x' AS region",
            format="json",
            partitioned_by=("region",),
            properties={"owner.team": "finance"},
            location="/data/t",
            comment="made by a test",
            atomicity="staging",
        )

    def test_a_producer_parameter_gives_the_job(self):
        job = _operator(table="db.t", producer="jobs.rows:make").build_job(_context())

        assert job.producer == "jobs.rows:make"
        assert job.query is None

    @pytest.mark.parametrize(
        ("fields", "named"),
        [
            ({"table": "db.t"}, "['table']"),
            ({"table": "db.t", "query": "SELECT 1"}, "['query', 'table']"),
            ({"partitioned_by": ["a"], "location": "/x"}, "['location', 'partitioned_by']"),
            ({"producer": "jobs.rows:make", "comment": "c", "properties": {}}, "['comment', 'producer', 'properties']"),
        ],
    )
    def test_sql_and_statement_parameters_together_are_rejected_by_name(self, fields, named):
        operator = _operator(sql="CREATE TABLE db.t AS SELECT 1", **fields)

        with pytest.raises(SpecError) as caught:
            operator.build_job(_context())

        assert f"give sql or {named}, not both" in str(caught.value)

    @pytest.mark.parametrize("fields", [{}, {"query": "SELECT 1"}, {"producer": "jobs.rows:make"}, {"comment": "c"}])
    def test_neither_sql_nor_table_is_rejected(self, fields):
        with pytest.raises(SpecError, match="nothing to create: give sql"):
            _operator(**fields).build_job(_context())

    def test_a_table_without_query_or_producer_is_rejected(self):
        with pytest.raises(SpecError, match="exactly one of query"):
            _operator(table="db.t").build_job(_context())

    def test_a_statement_that_is_not_a_ctas_is_rejected(self):
        with pytest.raises(SpecError, match="not a CTAS statement"):
            _operator(sql="INSERT INTO db.t SELECT 1").build_job(_context())

    @pytest.mark.parametrize(
        ("sql", "flags", "expected"),
        [
            ("CREATE TABLE db.t AS SELECT 1", {"if_not_exists": True}, (True, False)),
            ("CREATE TABLE IF NOT EXISTS db.t AS SELECT 1", {"if_not_exists": False}, (True, False)),
            ("CREATE TABLE db.t AS SELECT 1", {"replace": True}, (False, True)),
            ("REPLACE TABLE db.t AS SELECT 1", {"replace": False}, (False, True)),
            ("CREATE TABLE db.t AS SELECT 1", {}, (False, False)),
        ],
    )
    def test_flag_parameters_add_to_the_statement(self, sql, flags, expected):
        job = _operator(sql=sql, **flags).build_job(_context())

        assert (job.if_not_exists, job.replace) == expected

    def test_flag_parameters_apply_to_parameters_too(self):
        job = _operator(table="db.t", query="SELECT 1", replace=True).build_job(_context())

        assert job.replace is True
        assert job.with_format("parquet").atomicity == "staging"

    def test_flags_that_contradict_the_statement_are_rejected(self):
        with pytest.raises(SpecError, match="IF NOT EXISTS and REPLACE contradict"):
            _operator(sql="CREATE OR REPLACE TABLE db.t AS SELECT 1", if_not_exists=True).build_job(_context())

    def test_the_format_parameter_is_used_with_a_statement(self):
        assert _operator(sql="CREATE TABLE db.t AS SELECT 1", format="ORC").build_job(_context()).format == "orc"

    def test_the_format_parameter_wins_over_using(self):
        job = _operator(sql="CREATE TABLE db.t USING parquet AS SELECT 1", format="csv").build_job(_context())

        assert job.format == "csv"

    def test_the_atomicity_parameter_is_used_with_a_statement(self):
        job = _operator(sql="CREATE TABLE db.t AS SELECT 1", atomicity="staging").build_job(_context())

        assert job.atomicity == "staging"

    def test_a_replace_statement_with_table_atomicity_is_rejected(self):
        with pytest.raises(SpecError, match="REPLACE TABLE needs atomicity='staging'"):
            _operator(sql="REPLACE TABLE db.t AS SELECT 1", atomicity="table").build_job(_context())

    def test_the_owner_is_this_task_try(self):
        context = _context(dag_id="finance", run_id="scheduled__x", task_id="build", map_index=4, try_number=3)

        job = _operator(sql="CREATE TABLE db.t AS SELECT 1").build_job(context)

        assert job.owner == TableOwner(
            dag_id="finance", run_id="scheduled__x", task_id="build", map_index=4, try_number=3
        )

    def test_nothing_is_swept_without_claims(self):
        assert _operator(sql="CREATE TABLE db.t AS SELECT 1").build_job(_context()).sweep == ()

    def test_claims_of_finished_tasks_on_the_same_catalog_are_swept(self):
        write_claim(Claim(("db.a",), _owner(task_id="a", try_number=2), _CATALOG))
        write_claim(Claim(("db.b",), _owner(task_id="b"), _CATALOG))
        write_claim(Claim(("db.c",), _owner(task_id="c"), "other_catalog"))
        write_claim(Claim(("db.mine",), _owner(try_number=1), _CATALOG))

        job = _operator(sql="CREATE TABLE db.t AS SELECT 1").build_job(
            _context({"a": "failed", "b": "running", "c": "failed", "load": "failed"})
        )

        assert job.sweep == (CtasCleanupJob(tables=("db.a",), owner=_owner(task_id="a", try_number=2)),)

    def test_a_failure_to_look_for_claims_is_logged_not_raised(self, monkeypatch):
        def broken(ti, catalog_conn_id):
            raise OSError("exchange unreachable")

        warnings: list[str] = []
        log = SimpleNamespace(warning=lambda message, *args: warnings.append(message % args), info=lambda *args: None)
        monkeypatch.setattr(ctas_claims, "sweepable", broken)
        monkeypatch.setattr(SparkCtasOperator, "log", log)

        job = _operator(sql="CREATE TABLE db.t AS SELECT 1").build_job(_context())

        assert job.sweep == ()
        assert warnings == ["could not look for what lost tries of other tasks left: exchange unreachable"]


class TestCallbacks:
    def test_the_cleanup_callback_is_added_to_failure_and_retry(self):
        operator = _operator(sql="CREATE TABLE db.t AS SELECT 1")

        assert operator.on_failure_callback == [stop_lost_driver, clean_up_after_lost_try]
        assert operator.on_retry_callback == [clean_up_before_retry]

    def test_a_single_user_callback_is_kept_first(self):
        def alert(context):
            pass

        operator = _operator(sql="CREATE TABLE db.t AS SELECT 1", on_failure_callback=alert, on_retry_callback=alert)

        assert operator.on_failure_callback == [alert, stop_lost_driver, clean_up_after_lost_try]
        assert operator.on_retry_callback == [alert, clean_up_before_retry]

    @pytest.mark.parametrize("container", [list, tuple])
    def test_a_list_of_user_callbacks_is_kept_in_order(self, container):
        def alert(context):
            pass

        def page(context):
            pass

        operator = _operator(
            sql="CREATE TABLE db.t AS SELECT 1",
            on_failure_callback=container([alert, page]),
            on_retry_callback=container([page]),
        )

        assert operator.on_failure_callback == [alert, page, stop_lost_driver, clean_up_after_lost_try]
        assert operator.on_retry_callback == [page, clean_up_before_retry]


class TestTemplates:
    @pytest.mark.parametrize("field", ["sql", "table", "query", "location", "properties", "partitioned_by"])
    def test_statement_fields_are_templated(self, field):
        assert field in SparkCtasOperator.template_fields

    def test_the_base_fields_stay_templated_and_no_field_is_read_as_a_file(self):
        assert set(SparkJobOperator.template_fields) <= set(SparkCtasOperator.template_fields)
        assert SparkCtasOperator.template_ext == ()
        assert SparkCtasOperator.template_fields_renderers["sql"] == "sql"

    def test_parameters_are_rendered(self):
        operator = _operator(
            table="db.sales_{{ ds_nodash }}",
            query="SELECT * FROM raw WHERE day = '{{ ds }}'",
            location="/data/{{ ds }}",
            properties={"day": "{{ ds }}"},
            partitioned_by=["{{ params.column }}"],
        )

        operator.render_template_fields(
            {"ds": "2026-01-01", "ds_nodash": "20260101", "params": {"column": "region"}},
            jinja_env=jinja2.Environment(),
        )

        assert operator.table == "db.sales_20260101"
        assert operator.query == "SELECT * FROM raw WHERE day = '2026-01-01'"
        assert operator.location == "/data/2026-01-01"
        assert operator.properties == {"day": "2026-01-01"}
        assert operator.partitioned_by == ["region"]

    def test_a_sql_file_is_included_and_rendered(self, tmp_path):
        (tmp_path / "ctas").mkdir()
        (tmp_path / "ctas" / "daily.sql").write_text("CREATE TABLE db.t_{{ ds_nodash }} AS SELECT 1")
        operator = _operator(sql="{% include 'ctas/daily.sql' %}")

        operator.render_template_fields(
            {"ds_nodash": "20260101"}, jinja_env=jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path))
        )

        assert operator.sql == "CREATE TABLE db.t_20260101 AS SELECT 1"
        assert operator.build_job(_context()).table == "db.t_20260101"

    def test_a_sql_value_ending_in_dot_sql_is_not_read_as_a_file(self, tmp_path):
        (tmp_path / "ctas.sql").write_text("CREATE TABLE db.t AS SELECT 1")
        operator = _operator(sql="ctas.sql")

        operator.render_template_fields({}, jinja_env=jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path)))

        assert operator.sql == "ctas.sql"  # so build_job says it is not a CTAS statement, rather than run the file

    def test_a_query_that_ends_in_dot_sql_is_not_read_as_a_file(self, tmp_path):
        (tmp_path / "raw.sql").write_text("DROP TABLE raw")
        operator = _operator(table="db.t", query="SELECT * FROM raw.sql")

        operator.render_template_fields({}, jinja_env=jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path)))

        assert operator.query == "SELECT * FROM raw.sql"

    def test_a_table_named_like_a_sql_file_is_not_read_as_a_file(self, tmp_path):
        (tmp_path / "x.sql").write_text("other.table")
        operator = _operator(table="x.sql", query="SELECT 1")

        operator.render_template_fields({}, jinja_env=jinja2.Environment(loader=jinja2.FileSystemLoader(tmp_path)))

        assert operator.table == "x.sql"
        assert operator.build_job(_context()).table == "x.sql"


class TestExecute:
    def test_a_finished_job_returns_its_output_and_releases_the_claim(self, runs):
        fake = runs(ctas=_ctas_result(rows=3, created=True))

        value = _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert value == {
            "kind": "ctas",
            "version": 1,
            "table": "db.t",
            "atomicity": "table",
            "swept": [],
            "rows": 3,
            "created": True,
            "application_id": "local-1",
            "application_url": None,
            "master": "local[*]",
            "mode": "per-job",
            "spark_version": "4.2.0",
            "session_seconds": 1.5,
            "work_seconds": 2.5,
        }
        assert fake.kinds == ["ctas"]
        assert fake.claims_during == [Claim(("db.t",), _OWNER, _CATALOG)]  # claimed while the job ran
        assert read_claim(_OWNER) is None

    def test_the_claim_names_the_catalog_connection(self, runs, set_connection):
        set_connection("other_catalog", conn_type="spark_tables", extra={})
        fake = runs(ctas=_ctas_result())

        _operator(sql="CREATE TABLE db.t AS SELECT 1", catalog_conn_id="other_catalog").execute(_context())

        assert fake.claims_during == [Claim(("db.t",), _OWNER, "other_catalog")]

    def test_a_job_that_failed_and_cleaned_up_is_reraised_without_a_cleanup_job(self, runs, hooks_for):
        error = SparkJobFailed("table db.t already exists\n(the rest of the trace)")
        output = {
            "table": "db.t",
            "atomicity": "table",
            "undone": ["dropped the unfinished db.t of try 1"],
            "cleaned_up": True,
        }
        fake = runs(ctas=_Raised(error, JobResult(kind="ctas", error="x", output=output, application_id="local-9")))
        context = _context()

        with pytest.raises(SparkJobFailed) as caught:
            _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(context)

        assert caught.value is error
        assert fake.kinds == ["ctas"]
        assert [purpose for _, purpose in hooks_for] == [""]
        assert read_claim(_OWNER) is None
        report = context["ti"].pushed[FAILED_TRY]
        assert {key: report[key] for key in (*output, "application_id", "try_number", "error", "cleanup")} == {
            **output,
            "application_id": "local-9",
            "try_number": 1,
            "error": "table db.t already exists",
            "cleanup": None,
        }, "the failed try's report: what the job undid, where it ran, the error's first line; no cleanup job ran"

    @pytest.mark.parametrize(
        "result",
        [
            None,
            JobResult(kind="ctas", error="x"),
            JobResult(kind="ctas", error="x", output={"table": "db.t", "atomicity": "table", "cleaned_up": False}),
        ],
        ids=["no-result", "no-cleanup-report", "cleanup-not-done"],
    )
    def test_a_job_that_did_not_report_its_cleanup_gets_a_cleanup_job(self, runs, hooks_for, result):
        error = SparkJobFailed("the Spark job ended without writing its result")
        fake = runs(ctas=_Raised(error, result), ctas_cleanup=_cleanup_result())
        context = _context(try_number=2)

        with pytest.raises(SparkJobFailed) as caught:
            _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(context)

        assert caught.value is error
        assert fake.kinds == ["ctas", "ctas_cleanup"]
        (ctas, _), (cleanup, purpose) = hooks_for
        assert cleanup == CtasCleanupJob(tables=("db.t",), owner=_owner(try_number=2))
        assert cleanup.owner == ctas.owner
        assert purpose == "cleanup"
        assert fake.claims_during[1] == Claim(("db.t",), _owner(try_number=2), _CATALOG)  # released after it
        assert read_claim(_OWNER) is None
        report = context["ti"].pushed[FAILED_TRY]
        assert (report["try_number"], report["error"]) == (2, "the Spark job ended without writing its result")
        assert report["cleanup"] == ["dropped the unfinished db.t of try 1"], "what the cleanup job undid"

    def test_a_task_interrupted_while_its_job_cleaned_up_keeps_its_exception_and_releases_the_claim(self, runs):
        timeout = AirflowTaskTimeout("Timeout")  # raised in the task process: the hook stopped the job first
        stopped = JobResult(kind="ctas", error="cancelled: ...", output={**_CTAS, "cleaned_up": True, "swept": []})
        fake = runs(ctas=_Raised(timeout, stopped))

        with pytest.raises(AirflowTaskTimeout) as caught:
            _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert caught.value is timeout, "Airflow decides on retries from its own exception"
        assert fake.kinds == ["ctas"]
        assert read_claim(_OWNER) is None

    def test_a_task_interrupted_before_its_job_reported_gets_a_cleanup_job(self, runs):
        fake = runs(ctas=_Raised(AirflowTaskTimeout("Timeout")), ctas_cleanup=_cleanup_result())

        with pytest.raises(AirflowTaskTimeout):
            _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert fake.kinds == ["ctas", "ctas_cleanup"]
        assert read_claim(_OWNER) is None

    def test_the_cleanup_job_writes_its_own_result_file(self, runs):
        fake = runs(ctas=SparkJobFailed("lost"), ctas_cleanup=_cleanup_result())
        operator, context = _operator(sql="CREATE TABLE db.t AS SELECT 1"), _context()

        with pytest.raises(SparkJobFailed):
            operator.execute(context)

        assert fake.result_uris == [operator.result_uri(context), operator.result_uri(context, "cleanup")]
        assert fake.result_uris[0] != fake.result_uris[1]

    @pytest.mark.parametrize(
        "cleanup_error",
        [SparkJobFailed("catalog unreachable"), OSError("exchange unreachable")],
        ids=["cleanup-job-failed", "cleanup-could-not-start"],
    )
    def test_a_cleanup_job_that_fails_fails_the_task_with_the_job_s_error_logs_it_and_keeps_the_claim(
        self, runs, cleanup_error
    ):
        error = SparkJobFailed("lost")
        fake = runs(ctas=error, ctas_cleanup=cleanup_error)

        with structlog.testing.capture_logs() as logs, pytest.raises(SparkJobFailed) as caught:
            _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert caught.value is error
        assert fake.kinds == ["ctas", "ctas_cleanup"]
        assert read_claim(_OWNER) == Claim(("db.t",), _OWNER, _CATALOG)
        errors = [entry["event"] for entry in logs if entry["log_level"] == "error"]
        assert len(errors) == 1
        assert "the cleanup job failed too" in errors[0]
        assert str(cleanup_error) in errors[0]
        assert "the claim is kept" in errors[0]

    def test_swept_claims_are_released_when_undone_and_kept_when_not(self, runs):
        done, not_done = _owner(task_id="a", try_number=2), _owner(dag_id="other", task_id="b", map_index=1)
        for owner in (done, not_done):
            write_claim(Claim(("db.other",), owner, _CATALOG))
        runs(ctas=_ctas_result(swept=[_swept(done, ["dropped db.other"]), _swept(not_done, None)]))

        _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert read_claim(done) is None
        assert read_claim(not_done) == Claim(("db.other",), not_done, _CATALOG)
        assert read_claim(_OWNER) is None

    def test_an_empty_undone_list_releases_the_swept_claim(self, runs):
        swept = _owner(task_id="a")
        write_claim(Claim(("db.other",), swept, _CATALOG))
        runs(ctas=_ctas_result(swept=[_swept(swept, [])]))

        _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert read_claim(swept) is None

    def test_swept_claims_are_released_when_the_job_fails_too(self, runs):
        done, not_done = _owner(task_id="a"), _owner(task_id="b")
        for owner in (done, not_done):
            write_claim(Claim(("db.other",), owner, _CATALOG))
        output = {**_CTAS, "swept": [_swept(done, []), _swept(not_done, None)], "cleaned_up": True}
        runs(ctas=_Raised(SparkJobFailed("query failed"), JobResult(kind="ctas", error="query failed", output=output)))

        with pytest.raises(SparkJobFailed):
            _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context())

        assert read_claim(done) is None
        assert read_claim(not_done) is not None
        assert read_claim(_OWNER) is None

    def test_the_job_runs_with_the_sweep_it_was_built_with(self, runs):
        other = _owner(task_id="a")
        write_claim(Claim(("db.other",), other, _CATALOG))
        fake = runs(ctas=_ctas_result(swept=[_swept(other, [])]))

        _operator(sql="CREATE TABLE db.t AS SELECT 1").execute(_context({"a": "failed"}))

        assert fake.jobs[0].sweep == (CtasCleanupJob(tables=("db.other",), owner=other),)
        assert read_claim(other) is None

    @pytest.mark.usefixtures("nothing_is_started")
    @pytest.mark.parametrize(
        ("arguments", "named"),
        [
            ({"sql": "SELECT 1"}, "not a CTAS statement"),
            ({"sql": "CREATE TABLE db.t AS SELECT 1", "table": "db.t"}, "not both"),
            ({"sql": "CREATE TABLE db.t AS DROP TABLE x"}, "query must be a query"),
            ({"sql": "CREATE TABLE db.t AS SELECT 1", "conn_id": "spark_nowhere"}, "'spark_nowhere' does not exist"),
        ],
    )
    def test_bad_input_fails_the_task_without_a_claim(self, arguments, named):
        with structlog.testing.capture_logs() as logs, pytest.raises(AirflowFailException) as caught:
            _operator(**arguments).execute(_context())

        assert named in str(caught.value)
        assert "\n" not in str(caught.value)
        assert read_claim(_OWNER) is None
        assert not [entry for entry in logs if "cleanup" in entry["event"]], "nothing ran, so nothing is undone"


@pytest.fixture
def processor_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DAG processor's timeout as deployed (docker/compose.yaml, the tests' services): the callbacks' cleanup job
    fits in it."""
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT", "300")


@pytest.mark.usefixtures("processor_timeout")
class TestCleanUpAfterLostTry:
    @pytest.mark.usefixtures("nothing_is_started")
    def test_without_a_claim_nothing_is_started(self, hooks_for):
        operator = _operator(sql="CREATE TABLE db.t AS SELECT 1")

        clean_up_after_lost_try({**_context(), "task": operator})

        assert hooks_for == []

    def test_a_claim_gets_a_cleanup_job_then_is_released(self, runs, hooks_for):
        lost = _owner(try_number=2)
        write_claim(Claim(("db.t",), lost, _CATALOG))
        fake = runs(ctas_cleanup=_cleanup_result())
        operator = _operator(sql="CREATE TABLE db.t AS SELECT 1")

        clean_up_after_lost_try({**_context(try_number=2), "task": operator})

        assert fake.kinds == ["ctas_cleanup"]
        assert hooks_for == [(CtasCleanupJob(tables=("db.t",), owner=lost), "cleanup")]
        assert read_claim(lost) is None

    def test_the_claim_s_table_is_cleaned_even_if_the_task_now_names_another(self, runs, hooks_for):
        write_claim(Claim(("db.before",), _OWNER, _CATALOG))
        runs(ctas_cleanup=_cleanup_result(undone=[]))

        clean_up_after_lost_try({**_context(), "task": _operator(sql="CREATE TABLE db.after AS SELECT 1")})

        assert [job.tables for job, _ in hooks_for] == [("db.before",)]

    def test_a_late_callback_of_an_earlier_try_leaves_a_later_try_s_claim_and_tables_alone(self, runs, hooks_for):
        later = _owner(try_number=2)
        write_claim(Claim(("db.t",), later, _CATALOG))  # try 2 has started: its claim replaced try 1's
        runs(ctas_cleanup=_cleanup_result(undone=[]))

        clean_up_after_lost_try({**_context(try_number=1), "task": _operator(sql="CREATE TABLE db.t AS SELECT 1")})

        assert [job.owner.try_number for job, _ in hooks_for if job.owner.try_number > 1] == []
        assert read_claim(later) == Claim(("db.t",), later, _CATALOG)

    def test_the_lost_try_s_exchange_files_are_removed(self, runs):
        write_claim(Claim(("db.t",), _OWNER, _CATALOG))
        runs(ctas_cleanup=_cleanup_result())
        operator, context = _operator(sql="CREATE TABLE db.t AS SELECT 1"), _context()
        left = [
            Path(local_path(operator.result_uri(context))),
            Path(local_path(cancel_uri(operator.result_uri(context)))),
        ]
        for path in left:
            path.write_text("{}")

        clean_up_after_lost_try({**context, "task": operator})

        assert [path.exists() for path in left] == [False, False]
        assert list(left[0].parent.iterdir()) == []


_SCRIPT = "CREATE TABLE db.a AS SELECT 1 AS id; INSERT INTO db.a SELECT 2; CREATE TABLE db.b AS SELECT * FROM db.a"


def _sql_operator(sql: str = _SCRIPT) -> SparkSqlJobOperator:
    return SparkSqlJobOperator(task_id="load", sql=sql)


def _sql_result(**output: Any) -> JobResult:
    output = {"statements_run": 3, "ctas": [], "undone_before": [], "swept": [], **output}
    return JobResult(kind="sql", output=output, application_id="local-1")


class TestCallbackWithinTheDagProcessorsTimeout:
    """The DAG processor kills a callback after ``[dag_processor] dag_file_processor_timeout`` (50 s by default): the
    callbacks spend only that, and say in one line what to raise when the cleanup job does not fit."""

    def test_with_the_default_timeout_the_cleanup_is_left_to_the_next_ctas_in_one_line(self, hooks_for):
        write_claim(Claim(("db.t",), _OWNER, _CATALOG))
        operator = _operator(sql="CREATE TABLE db.t AS SELECT 1")

        with structlog.testing.capture_logs() as logs:
            clean_up_after_lost_try({**_context(), "task": operator})

        assert hooks_for == [], "no cleanup job that the DAG processor would kill half way"
        assert read_claim(_OWNER) == Claim(("db.t",), _OWNER, _CATALOG), "the claim stays for the next CTAS's sweep"
        [warning] = [entry["event"] for entry in logs if entry["log_level"] == "warning"]
        assert warning == (
            "the cleanup job of db.t needs up to 60 s, more than [dag_processor] dag_file_processor_timeout leaves "
            "this callback: the claim is left to the next CTAS on the catalog; raise the timeout to 95 s or more to "
            "clean up here"
        )

    @pytest.mark.parametrize(
        ("timeout", "stop_wait", "cleanup_fits"),
        [(50, 45, False), (94, 89, False), (95, 30, True), (300, 180, True), (3, 0, False)],
    )
    def test_the_time_is_shared_between_the_driver_s_stop_and_the_cleanup_job(self, timeout, stop_wait, cleanup_fits):
        assert CallbackTime.within(timeout, longest_stop_wait=180) == CallbackTime(stop_wait, cleanup_fits)


class TestSqlJobCtasStatements:
    """SparkSqlJobOperator's CTAS statements get SparkCtasOperator's Airflow side: owner, sweep, claim, cleanup."""

    def test_the_job_is_this_try_s_and_sweeps_what_lost_tries_of_other_tasks_left(self):
        write_claim(Claim(("db.x", "db.y"), _owner(task_id="a"), _CATALOG))

        job = _sql_operator().build_job(_context({"a": "failed"}))

        assert job.owner == _OWNER
        assert job.owned_tables == ("db.a", "db.b")
        assert job.sweep == (CtasCleanupJob(tables=("db.x", "db.y"), owner=_owner(task_id="a")),)

    def test_a_job_without_ctas_statements_looks_for_no_claims_to_sweep(self, monkeypatch):
        monkeypatch.setattr(ctas_claims, "sweepable", lambda *args: pytest.fail("looked for claims"))

        job = _sql_operator("CREATE TABLE db.a (id INT) USING parquet; INSERT INTO db.a SELECT 1").build_job(_context())

        assert job.sweep == () and job.owned_tables == ()

    def test_the_claim_names_the_ctas_tables_while_the_job_runs_and_is_released_after(self, runs):
        fake = runs(sql=_sql_result())

        value = _sql_operator().execute(_context())

        assert fake.kinds == ["sql"]
        assert fake.claims_during == [Claim(("db.a", "db.b"), _OWNER, _CATALOG)]
        assert read_claim(_OWNER) is None
        assert value["statements_run"] == 3

    def test_a_job_that_undid_its_tables_is_reraised_without_a_cleanup_job(self, runs):
        error = SparkJobFailed("statement 3/3 failed: x (undone: dropped the unfinished db.a of try 1)")
        fake = runs(sql=_Raised(error, JobResult(kind="sql", error="x", output={"cleaned_up": True, "swept": []})))

        with pytest.raises(SparkJobFailed) as caught:
            _sql_operator().execute(_context())

        assert caught.value is error
        assert fake.kinds == ["sql"]
        assert read_claim(_OWNER) is None

    def test_a_job_that_did_not_report_its_cleanup_gets_one_cleanup_job_for_every_ctas_table(self, runs):
        fake = runs(
            sql=SparkJobFailed("the Spark job ended without writing its result"), ctas_cleanup=_cleanup_result()
        )

        with pytest.raises(SparkJobFailed):
            _sql_operator().execute(_context())

        assert fake.kinds == ["sql", "ctas_cleanup"]
        assert fake.jobs[1] == CtasCleanupJob(tables=("db.a", "db.b"), owner=_OWNER)
        assert read_claim(_OWNER) is None

    def test_a_failed_job_without_ctas_statements_has_no_claim_and_gets_no_cleanup_job(self, runs):
        fake = runs(sql=SparkJobFailed("the Spark job ended without writing its result"))

        with pytest.raises(SparkJobFailed):
            _sql_operator("INSERT INTO db.a SELECT 1").execute(_context())

        assert fake.kinds == ["sql"]
        assert fake.claims_during == [None]

    @pytest.mark.usefixtures("processor_timeout")
    def test_a_lost_try_s_claim_gets_a_cleanup_job_from_the_callback(self, runs):
        write_claim(Claim(("db.a", "db.b"), _OWNER, _CATALOG))
        fake = runs(ctas_cleanup=_cleanup_result())
        operator = _sql_operator()

        assert operator.on_failure_callback == [stop_lost_driver, clean_up_after_lost_try]
        assert operator.on_retry_callback == [clean_up_before_retry]
        clean_up_before_retry({**_context(), "task": operator})

        assert fake.jobs == [CtasCleanupJob(tables=("db.a", "db.b"), owner=_OWNER)]
        assert read_claim(_OWNER) is None

    def test_a_lost_try_s_durable_claim_is_left_to_the_next_try_which_takes_its_driver_over(self, runs):
        write_claim(Claim(("db.a",), _OWNER, _CATALOG, durable=True))
        fake = runs(ctas_cleanup=_cleanup_result())

        clean_up_before_retry({**_context(), "task": _sql_operator()})

        assert fake.jobs == []
        assert read_claim(_OWNER) == Claim(("db.a",), _OWNER, _CATALOG, durable=True)

    @pytest.mark.usefixtures("nothing_is_started")
    @pytest.mark.parametrize(
        ("sql", "named"),
        [
            ("CREATE TABLE db.a USING parquet OPTIONS ('k' 'v') AS SELECT 1", "sql job: statement 1: CTAS statement"),
            ("CREATE TABLE db.a AS SELECT 1; CREATE TABLE db.a AS SELECT 2", "statements 1 and 2 both create db.a"),
        ],
    )
    def test_a_ctas_statement_that_cannot_run_as_a_ctas_fails_the_task_before_anything_starts(self, sql, named):
        with pytest.raises(AirflowFailException) as caught:
            _sql_operator(sql).execute(_context())

        assert named in str(caught.value)
        assert "\n" not in str(caught.value)
        assert read_claim(_OWNER) is None
