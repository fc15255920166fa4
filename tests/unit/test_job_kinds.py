"""A new job kind is its own folders and one line in ``core.kinds.KINDS``: a dummy kind added that way is seen by
the job spec, the job result, the driver, session mode, the monitoring pages and the generated docs."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.job_kind import JobKind, by_name
from spark_tables.core.job_output import JobOutput
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.kinds import KINDS
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.sql.result import SqlResult
from spark_tables.jobs.entry import run_job
from spark_tables.plugins.monitoring.entries import XComEntry
from spark_tables.plugins.monitoring.summaries import kind_summary, run_summary, task_summary

_SPARK = SimpleNamespace(conf=SimpleNamespace(get={"spark.app.id": "local-1"}.__getitem__), version="4.2.0")
RUNNER_MODULE = "spark_tables.jobs.echo_for_tests"


@dataclass(frozen=True)
class EchoJob:
    """A job that says its words back."""

    kind: ClassVar[str] = "echo"
    words: str
    refuse_session_mode: bool = False


@dataclass(frozen=True)
class EchoResult(JobOutput):
    kind: ClassVar[str] = "echo"
    echoed: str | None = None


def run_echo(spark: Any, job: EchoJob, cancellation: Any) -> EchoResult:
    return EchoResult(echoed=job.words.upper())


def echo_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    return {"echo": f"said {value['echoed']}"}


def echo_refused(job: EchoJob) -> str | None:
    """An echo that asks not to run on a server."""
    return "echo: this one runs per job only: use a spark connection" if job.refuse_session_mode else None


ECHO = JobKind(
    job=EchoJob,
    result=EchoResult,
    runner=f"{RUNNER_MODULE}:run_echo",
    summary=echo_summary,
    refused_in_session_mode=echo_refused,
)


@pytest.fixture
def echo_kind(monkeypatch: pytest.MonkeyPatch) -> JobKind:
    """The echo kind's runner in its own module of ``jobs/``, and its one line in ``KINDS``."""
    runner_module = types.ModuleType(RUNNER_MODULE)
    runner_module.run_echo = run_echo  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, RUNNER_MODULE, runner_module)
    monkeypatch.setitem(KINDS, ECHO.name, ECHO)  # the one line
    return ECHO


def test_the_job_spec_reads_and_writes_a_job_of_the_new_kind(echo_kind: JobKind) -> None:
    spec = JobSpec(job=EchoJob(words="hello"), result_uri="file:///tmp/r.json")
    assert JobSpec.from_json(spec.to_json()).job == EchoJob(words="hello")


def test_the_driver_runs_the_new_kinds_runner_and_its_result_reads_back(echo_kind: JobKind) -> None:
    result = run_job(_SPARK, EchoJob(words="hello"))  # type: ignore[arg-type]
    assert result.error is None and result.output == EchoResult(echoed="HELLO")
    assert JobResult.from_json(result.to_json()) == result


def test_the_monitoring_pages_summarise_the_new_kind_by_its_summary(echo_kind: JobKind) -> None:
    value = {**JobResult(kind="echo", output=EchoResult(echoed="HELLO")).output_fields(), "application_id": "a-1"}
    entry = XComEntry("say", -1, "return_value", value)
    assert task_summary([entry])["kind"] == "echo"
    [job] = run_summary([entry])["jobs"]
    assert job["application_id"] == "a-1"
    assert kind_summary(entry) == {"echo": "said HELLO"}


def test_session_mode_asks_the_new_kind_what_it_refuses(echo_kind: JobKind) -> None:
    from spark_tables.hooks.spark_connect_job import SparkConnectJobHook

    spec = JobSpec(job=EchoJob(words="hello", refuse_session_mode=True), result_uri="file:///tmp/r.json")
    with pytest.raises(SpecError, match=r"^echo: this one runs per job only: use a spark connection$"):
        SparkConnectJobHook(spec=spec, conn_id="no_such_server")


def test_the_generated_docs_list_the_new_kind(echo_kind: JobKind) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "docs_generated.py"
    spec = importlib.util.spec_from_file_location("docs_generated", script)
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    [row] = [line for line in generator.job_kinds().splitlines() if line.startswith("| `echo` |")]
    assert "`run_echo`" in row and "yes, but not an echo that asks not to run on a server" in row


def test_a_kind_whose_job_and_result_disagree_or_whose_runner_is_not_a_job_module_is_refused() -> None:
    with pytest.raises(SpecError, match="job kind 'echo': its result SqlResult is of 'sql'"):
        JobKind(job=EchoJob, result=SqlResult, runner=f"{RUNNER_MODULE}:run_echo")
    with pytest.raises(SpecError, match=r"runner 'spark_tables\.hooks\.x:run' is not"):
        JobKind(job=EchoJob, result=EchoResult, runner="spark_tables.hooks.x:run")
    with pytest.raises(SpecError, match="job kinds named twice"):
        by_name(ECHO, dataclasses.replace(ECHO, summary=echo_summary))


def test_the_provider_declares_each_kind_once_with_its_own_result() -> None:
    assert KINDS["sql"].job is SqlJob and KINDS["sql"].result is SqlResult
    assert all(kind.job.kind == kind.result.kind == name for name, kind in KINDS.items())
