"""A job kind's descriptor: all that the layers outside its capability need to know of one kind of job.

A capability declares its kinds in its own ``core`` package (``core/<capability>/kind.py``), and
``core.kinds.KINDS`` lists them: the job spec reads a job by its kind's ``job`` class, the job result its output by
``result``, the Spark driver runs ``runner``, the monitoring pages show ``summary``, and session mode asks
``refused_in_session_mode``. The runner is named as ``module:function`` because ``core`` imports nothing of
``jobs/`` (the Airflow side must not), and the driver imports only its own job's runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from spark_tables.core.errors import SpecError
from spark_tables.core.job_output import JobOutput


class Job(Protocol):
    """A job of one kind: a frozen dataclass that validates itself, named by its ``kind``."""

    kind: ClassVar[str]


#: What the monitoring pages show of a job's output (its CTAS tables, its lookup, what it undid), given its XCom's
#: value and, for a failed try, the try's failure.
Summary = Callable[[dict[str, Any], dict[str, Any] | None], dict[str, Any]]


def no_summary(value: dict[str, Any], failure: dict[str, Any] | None) -> dict[str, Any]:
    """A kind whose pages show its job line and output only."""
    return {}


def no_table_formats(job: Any) -> tuple[str, ...]:
    """A kind whose jobs make no table in a format a catalog loads."""
    return ()


def runs_in_session_mode(job: Any) -> str | None:
    """A kind every job of which runs in session mode."""
    return None


@dataclass(frozen=True)
class JobKind:
    """One kind of job.

    :param job: its job class (a frozen dataclass with ``kind``), which the spec carries.
    :param result: its typed output (``core.job_output.JobOutput``), which the result and the task's XCom carry.
    :param runner: the Spark side's function that runs a job of this kind, as ``module:function``: given the
        session, the job and its cancellation, it returns a ``result``.
    :param summary: what the monitoring pages show of its output beside the job line.
    :param streams: whether its jobs may run streaming queries (a plan's when it executes, a lookup join's of a stream).
    :param refused_in_session_mode: why a job of this kind cannot run on a Spark Connect server (one line, with what
        to do), or None when it can; asked before anything starts.
    :param table_formats: the table formats (``core.table_format``) a job of this kind makes tables in, which its
        catalog must load; asked before a job's spark-submit.
    """

    job: type[Job]
    result: type[JobOutput]
    runner: str
    summary: Summary = no_summary
    streams: bool = False
    refused_in_session_mode: Callable[[Any], str | None] = runs_in_session_mode
    table_formats: Callable[[Any], tuple[str, ...]] = no_table_formats

    def __post_init__(self) -> None:
        if self.job.kind != self.result.kind:
            raise SpecError(f"job kind {self.job.kind!r}: its result {self.result.__name__} is of {self.result.kind!r}")
        module, _, function = self.runner.partition(":")
        if not module.startswith("spark_tables.jobs.") or not function.isidentifier():
            raise SpecError(
                f"job kind {self.name!r}: runner {self.runner!r} is not 'spark_tables.jobs.<module>:<function>'"
            )

    @property
    def name(self) -> str:
        return self.job.kind


def by_name(*kinds: JobKind) -> dict[str, JobKind]:
    """``kinds`` by name; a name given twice is a mistake of the list."""
    named = {kind.name: kind for kind in kinds}
    if len(named) != len(kinds):
        raise SpecError(f"job kinds named twice: {sorted(kind.name for kind in kinds)}")
    return named
