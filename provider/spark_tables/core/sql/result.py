"""What a ``sql`` job reports: the tables its statements wrote, its CTAS and plan statements, the last query's rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_tables.core.ctas.result import CtasTableReport, SweptClaim
from spark_tables.core.job_output import JobOutput
from spark_tables.core.plan.result import PlanResult


@dataclass(frozen=True)
class SqlResult(JobOutput):
    """``swept`` and ``undone_before``: what the job undid before its statements (of lost tries of other tasks, and
    of earlier tries of its own); then, once they all ran, ``statements_run``, ``tables_written`` with their
    ``row_counts``, each CTAS statement's table (``ctas``), each plan statement (``plans``), and the last query's
    ``columns``, ``rows`` and ``rows_truncated``. A failed job that undid its CTAS tables says ``undone`` and
    ``cleaned_up``."""

    kind: ClassVar[str] = "sql"
    swept: list[SweptClaim] = field(default_factory=list)
    undone_before: list[str] | None = None
    statements_run: int | None = None
    tables_written: list[str] | None = None
    row_counts: dict[str, int] | None = None
    ctas: list[CtasTableReport] | None = None
    plans: list[PlanResult] | None = None
    columns: list[str] | None = None
    rows: list[list[Any]] | None = None
    rows_truncated: bool | None = None
    undone: list[str] | None = None
    cleaned_up: bool | None = None
