"""The job result: what the Spark driver writes back for the Airflow side, as one JSON document."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class JobResult:
    """``output`` is the job kind's own small summary; ``error`` is one line when the job failed.

    ``caches`` reports, by name, how each cached table the job read was made ready (also when the job failed).
    """

    kind: str
    output: dict[str, Any] = field(default_factory=dict)
    caches: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    application_id: str | None = None
    spark_version: str | None = None
    #: Seconds spent in the driver: starting the session, and doing the job's work after that.
    session_seconds: float | None = None
    work_seconds: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str)

    @classmethod
    def from_json(cls, text: str) -> JobResult:
        return cls(**json.loads(text))
