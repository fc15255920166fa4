"""The job result: what the Spark driver writes back for the Airflow side, as one JSON document.

Its ``output`` is the job kind's typed output (its ``result`` in ``core.kinds``), and the document carries the kind
and ``RESULT_VERSION``, as does the task's XCom (``xcom_fields``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.job_output import JobOutput
from spark_tables.core.kinds import KINDS, kind_of

RESULT_VERSION = 1
#: The keys of a task's XCom that name its job result's kind and ``RESULT_VERSION`` (``xcom_fields``): no output has
#: a field of either name.
RESULT_KEYS = ("kind", "version")


@dataclass(frozen=True)
class JobResult:
    """``output`` is the job kind's own typed summary (None when a job failed before it had one; given as a dict, it
    is read as one); ``error`` is one line when the job failed.

    ``caches`` reports, by name, how each cached table the job read was made ready (also when the job failed).
    """

    kind: str
    output: JobOutput | None = None
    caches: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    application_id: str | None = None
    spark_version: str | None = None
    #: Seconds spent in the driver: starting the session, and doing the job's work after that.
    session_seconds: float | None = None
    work_seconds: float | None = None

    def __post_init__(self) -> None:
        described = kind_of(self.kind)
        if described is None:
            raise SpecError(f"unknown job kind {self.kind!r} in a job result: use one of {sorted(KINDS)}")
        if isinstance(self.output, dict):
            object.__setattr__(self, "output", described.result.from_dict(self.output, f"{self.kind} job result"))
        if self.output is not None and not isinstance(self.output, described.result):
            raise SpecError(
                f"{self.kind} job result: its output is a {type(self.output).__name__}, "
                f"not a {described.result.__name__}"
            )

    @property
    def succeeded(self) -> bool:
        return self.error is None

    def output_fields(self) -> dict[str, Any]:
        """The output as the task's XCom holds it: its fields, with the kind and version of the result."""
        return xcom_fields(self.kind, self.output)

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": RESULT_VERSION,
                "kind": self.kind,
                "output": self.output.to_dict() if self.output is not None else None,
                "caches": self.caches,
                "error": self.error,
                "application_id": self.application_id,
                "spark_version": self.spark_version,
                "session_seconds": self.session_seconds,
                "work_seconds": self.work_seconds,
            },
            default=str,
        )

    @classmethod
    def from_json(cls, text: str) -> JobResult:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != RESULT_VERSION:
            version = data.get("version") if isinstance(data, dict) else None
            raise SpecError(f"job result version {version!r} is not {RESULT_VERSION}: the driver is of another release")
        kind = data.pop("kind", None)
        data.pop("version")
        output = data.pop("output", None)
        return cls(kind=kind, output=output, **data)


def xcom_fields(kind: str, output: JobOutput | None) -> dict[str, Any]:
    """What a job's output puts in its task's XCom: ``kind``, ``version`` and the output's fields."""
    return {"kind": kind, "version": RESULT_VERSION, **(output.to_dict() if output is not None else {})}
