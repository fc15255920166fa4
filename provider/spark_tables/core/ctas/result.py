"""What the ``ctas`` and ``ctas_cleanup`` jobs report, and what a ``sql`` job reports of each CTAS statement."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_tables.core.job_output import JobOutput


@dataclass(frozen=True)
class SweptClaim(JobOutput):
    """What a job undid, before its own work, of the tables a lost try of another task had claimed; ``undone`` is
    None when it could not (the claim is kept for later)."""

    KEPT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"undone"})
    tables: list[str]
    owner: dict[str, Any]
    undone: list[str] | None = None


@dataclass(frozen=True)
class CtasTableReport(JobOutput):
    """What one CTAS did with its table: ``created`` (and ``replaced``), ``reused_from_try`` (an earlier try had
    completed it) or ``skipped``; where the finished table is and what its making wrote (``files`` and the
    ``committed_version``, the table version its commit made, where the format keeps them: Delta Lake); in a failed
    job, what it ``undone``. ``statement`` is its statement's number in a ``sql`` job; ``dropped_later``, that a later
    statement of that job dropped the table; ``kept_files``, where the files of an external table it replaced stay
    (dropped as Spark's DROP TABLE drops an external table: its entry goes, its files are not the provider's to
    delete)."""

    table: str
    atomicity: str
    statement: int | None = None
    created: bool | None = None
    replaced: bool | None = None
    kept_files: str | None = None
    reused_from_try: str | None = None
    skipped: str | None = None
    dropped_later: bool | None = None
    location: str | None = None
    format: str | None = None
    rows: int | None = None
    bytes: int | None = None
    files: int | None = None
    committed_version: int | None = None
    undone: list[str] | None = None


@dataclass(frozen=True)
class CtasResult(CtasTableReport):
    """A ``ctas`` job's table, with what it undid first: of lost tries of other tasks (``swept``), and of earlier
    tries of its own task (``undone_before``). A failed job that undid what it made says ``cleaned_up``."""

    kind: ClassVar[str] = "ctas"
    swept: list[SweptClaim] = field(default_factory=list)
    undone_before: list[str] | None = None
    cleaned_up: bool | None = None


@dataclass(frozen=True)
class CtasCleanupResult(JobOutput):
    """What a ``ctas_cleanup`` job undid of the tables a try left unfinished."""

    kind: ClassVar[str] = "ctas_cleanup"
    tables: list[str]
    undone: list[str]
    cleaned_up: bool = True
