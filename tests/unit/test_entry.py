"""run_job and runner: every job kind's runner imports, and a cancellation shapes the result, without Spark."""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace
from typing import Any

import pytest
from pyspark.errors import AnalysisException

from spark_tables.core.errors import JobError
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.kinds import KINDS
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.sql.result import SqlResult
from spark_tables.jobs import entry
from spark_tables.jobs.cancellation import Cancellation

_SPARK = SimpleNamespace(conf=SimpleNamespace(get={"spark.app.id": "local-1"}.__getitem__), version="4.2.0")


def test_every_job_kind_has_a_runner():
    assert all(callable(entry.runner(kind)) for kind in KINDS)


def test_the_driver_imports_only_its_own_jobs_runner():
    """A SQL job's driver does not pay for the plan compiler's and the lookups' imports before its session."""
    import subprocess
    import sys

    code = (
        "import sys, spark_tables.jobs.entry as entry; entry.runner('sql'); "
        "print(sorted(m for m in ('sqlglot', 'pyarrow', 'psycopg', 'spark_tables.jobs.plan.runner', "
        "'spark_tables.jobs.lookup.join', 'spark_tables.jobs.aggregation.runner') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def _runs_sql_with(monkeypatch: pytest.MonkeyPatch, run: Any) -> None:
    """The sql job kind runs ``run`` instead of its runner."""
    real = entry.runner
    monkeypatch.setattr(entry, "runner", lambda kind: run if kind == "sql" else real(kind))


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The calls of the sql runner, which returns a small output, instead of running on Spark."""
    calls: list[tuple] = []

    def run(spark, job, cancellation):
        calls.append((spark, job, cancellation))
        return SqlResult(statements_run=len(job.statements))

    _runs_sql_with(monkeypatch, run)
    return calls


def test_run_job_passes_the_cancellation_to_the_runner(runs):
    stop = Cancellation()
    job = SqlJob(statements=["SELECT 1"])

    result = entry.run_job(_SPARK, job, stop)

    assert result.succeeded
    assert result.output == SqlResult(statements_run=1)
    assert runs == [(_SPARK, job, stop)]


def test_run_job_without_a_cancellation_gives_the_runner_one(runs):
    entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]))

    assert isinstance(runs[0][2], Cancellation)


def test_run_job_after_a_request_fails_cancelled_without_running(runs):
    stop = Cancellation()
    stop.request("the task was marked failed")

    result = entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]), stop)

    assert runs == []
    assert result.error == "cancelled: the task was marked failed"


def test_a_failure_after_a_request_is_reported_as_cancelled(monkeypatch):
    stop = Cancellation()

    def interrupted(spark, job, cancellation):
        cancellation.request("the task timed out")
        raise JobError("statement 1 failed: job interrupted")

    _runs_sql_with(monkeypatch, interrupted)

    result = entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]), stop)

    assert result.error == "cancelled: the task timed out (statement 1 failed: job interrupted)"


def _failing_with(monkeypatch, error):
    def fail(spark, job, cancellation):
        raise error

    _runs_sql_with(monkeypatch, fail)


@pytest.mark.parametrize(
    "error",
    [
        JobError("statement 1 failed: [TABLE_OR_VIEW_NOT_FOUND] no table t"),
        AnalysisException("[TABLE_OR_VIEW_NOT_FOUND] The table t cannot be found.\nJVM stacktrace: ..."),
    ],
    ids=["job-error", "pyspark-exception"],
)
def test_a_failure_the_job_can_name_is_logged_on_one_line(monkeypatch, caplog, error):
    _failing_with(monkeypatch, error)

    with caplog.at_level(logging.INFO, logger="spark_tables"):
        result = entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]))

    failures = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert len(failures) == 1
    assert failures[0].exc_info is None
    assert failures[0].getMessage() == f"sql job failed: {result.error}"
    assert "\n" not in failures[0].getMessage()


def test_any_other_failure_is_logged_with_its_traceback(monkeypatch, caplog):
    _failing_with(monkeypatch, KeyError("columns"))

    with caplog.at_level(logging.INFO, logger="spark_tables"):
        result = entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]))

    failures = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert len(failures) == 1
    assert failures[0].getMessage() == "sql job failed"
    assert failures[0].exc_info is not None
    assert failures[0].exc_info[0] is KeyError  # logged with its traceback (records, not text: pyspark may format)
    assert result.error == "KeyError: 'columns'"


def test_a_failure_keeps_the_output_its_error_carries(monkeypatch):
    error = JobError("table t already exists")
    error.output = SqlResult(undone=[], cleaned_up=True)
    _failing_with(monkeypatch, error)

    result = entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]))

    assert result.error == "table t already exists"
    assert result.output == SqlResult(undone=[], cleaned_up=True)


def test_a_failure_without_output_has_no_output(monkeypatch):
    _failing_with(monkeypatch, RuntimeError("lost executor"))

    result = entry.run_job(_SPARK, SqlJob(statements=["SELECT 1"]))

    assert result.output is None
    assert result.error == "RuntimeError: lost executor"
    assert result.kind == "sql"
    assert result.application_id == "local-1"
    assert result.spark_version == "4.2.0"


class FakeBuilder:
    """``SparkSession.builder`` for ``entry.main``: records the conf it is given, then the session's start and stop."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def config(self, key: str, value: str) -> FakeBuilder:
        self.calls.append((key, value))
        return self

    def getOrCreate(self) -> Any:
        self.calls.append("getOrCreate")
        return SimpleNamespace(interruptAll=lambda: [], stop=lambda: self.calls.append("stopped"))


def _main_with_spec(spec: JobSpec, folder: Any, monkeypatch: Any, ran: list[Any]) -> FakeBuilder:
    """``entry.main`` on ``spec`` left as a file in ``folder``, with a fake session; the jobs it ran go to ``ran``."""
    (folder / "r.spec.json").write_text(spec.to_json())
    builder = FakeBuilder()
    monkeypatch.setattr(entry, "watch", lambda *args, **kwargs: None)
    monkeypatch.setattr(entry.SparkSession, "builder", builder)
    monkeypatch.setattr(
        entry, "run_job", lambda spark, job, cancellation, caches, folders: ran.append(job) or JobResult("sql")
    )
    assert entry.main(["entry.py", f"@file://{folder}/r.spec.json"]) == 0
    return builder


def _session_calls(builder: FakeBuilder) -> list[Any]:
    """The builder's calls but the Hive resources folder's, checked set to a folder of the driver's own, now gone."""
    [folder] = [call[1] for call in builder.calls if call[0] == entry.HIVE_RESOURCES_DIR]
    assert os.path.basename(folder).startswith("spark_tables_driver_") and not os.path.exists(folder)
    return [call for call in builder.calls if call[0] != entry.HIVE_RESOURCES_DIR]


def test_main_reads_a_spec_given_as_a_file(tmp_path, monkeypatch):
    """``entry.py @<uri>``: the driver reads the spec the task left in the exchange."""
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"file://{tmp_path}/r.json")
    ran: list[Any] = []

    builder = _main_with_spec(spec, tmp_path, monkeypatch, ran)

    assert ran == [spec.job] and _session_calls(builder) == ["getOrCreate", "stopped"]
    assert JobResult.from_json((tmp_path / "r.json").read_text()).kind == "sql"


def test_main_sets_the_specs_session_conf_before_the_session_starts(tmp_path, monkeypatch, caplog):
    """The secrets spark-submit was not given (the metastore's password) reach the session, and no log line."""
    secret = {"spark.hadoop.javax.jdo.option.ConnectionPassword": "m3tastore-Pa55"}
    spec = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"file://{tmp_path}/r.json", session_conf=secret)

    with caplog.at_level(logging.DEBUG):
        builder = _main_with_spec(spec, tmp_path, monkeypatch, [])

    assert _session_calls(builder) == [
        ("spark.hadoop.javax.jdo.option.ConnectionPassword", "m3tastore-Pa55"),
        "getOrCreate",
        "stopped",
    ]
    assert "m3tastore-Pa55" not in caplog.text
