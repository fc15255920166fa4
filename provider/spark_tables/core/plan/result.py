"""What a ``plan`` job reports: its statement's action and plan, and what compiling, explaining or executing it did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from spark_tables.core.job_output import JobOutput


@dataclass(frozen=True)
class PlanResult(JobOutput):
    """``compile``: whether the plan file was written; ``explain``: the plan's graph with each operator's TTL and its
    ``text``; ``execute``: each sink query's report (or why nothing ran). ``statement`` is the statement's number
    when a ``sql`` job ran it."""

    kind: ClassVar[str] = "plan"
    action: str
    plan_uri: str
    statement: int | None = None
    compile: dict[str, Any] | None = None
    explain: dict[str, Any] | None = None
    execute: dict[str, Any] | None = None
