"""A ``sql`` job: Spark SQL statements run in order in one application."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob, sweep_entries
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.sql.statement import SqlStatement

MAX_RESULT_ROWS_LIMIT = 10_000


def statement_list(statements: Any) -> tuple[Any, ...]:
    """``statements`` as a non-empty tuple; ``SpecError`` when it is not a list (one string: not split) or empty."""
    if isinstance(statements, str) or not isinstance(statements, list | tuple):
        raise SpecError("sql job: statements must be a list of SQL strings; split a script on ';'")
    if not statements:
        raise SpecError("sql job: no statements given: pass at least one SQL statement")
    return tuple(statements)


@dataclass(frozen=True)
class SqlJob:
    """Statements run in order; the rows of the last one, if it returns rows, come back capped.

    Each statement comes read (``SqlStatement``, made by ``tasks.sql_reader.read_statements`` on the Airflow side):
    its text, the table it writes, and its CTAS or plan statement.

    A ``CREATE TABLE ... AS SELECT`` among them runs as a CTAS job (``ctas``): its table is marked as ``owner``'s
    (the task try), kept only if the whole job succeeds, and dropped if it fails or stops. ``sweep`` is what lost
    tries of other tasks left, undone before the statements run, as a CTAS job does.

    A plan statement (``COMPILE PLAN``, ``EXECUTE PLAN``, ``EXPLAIN PLAN``) runs as a plan job does, with ``plans``.

    ``count_rows``: count each written table's rows afterwards for the result's ``row_counts``, one Spark job a
    table (parquet: its footers; a CSV or JSON table: a full scan).
    """

    kind: ClassVar[str] = "sql"
    statements: tuple[SqlStatement, ...]
    max_result_rows: int = 100
    owner: TableOwner | None = None
    sweep: tuple[CtasCleanupJob, ...] = ()
    plans: PlanOptions | None = None
    count_rows: bool = True

    def __post_init__(self) -> None:
        statements = []
        for number, statement in enumerate(statement_list(self.statements), start=1):
            try:
                statements.append(SqlStatement.from_dict(statement))
            except SpecError as err:
                raise SpecError(f"sql job: statement {number} {err}") from None
        object.__setattr__(self, "statements", tuple(statements))
        if (
            isinstance(self.max_result_rows, bool)
            or not isinstance(self.max_result_rows, int)
            or not 0 <= self.max_result_rows <= MAX_RESULT_ROWS_LIMIT
        ):
            raise SpecError(
                f"sql job: max_result_rows={self.max_result_rows!r} is invalid: use a whole number from 0 "
                f"to {MAX_RESULT_ROWS_LIMIT}"
            )
        if not isinstance(self.count_rows, bool):
            raise SpecError(f"sql job: count_rows={self.count_rows!r} is invalid: use True or False")
        if self.owner is not None:
            object.__setattr__(self, "owner", TableOwner.from_dict(self.owner))
        object.__setattr__(self, "sweep", sweep_entries(self.sweep, "sql job"))
        if self.plans is not None:
            object.__setattr__(self, "plans", PlanOptions.from_dict(self.plans))
        self._check_ctas()
        self._check_plan_statements()

    @cached_property
    def ctas(self) -> dict[int, CtasJob]:
        """The CTAS job of each statement that is a ``CREATE TABLE ... AS SELECT``, by statement number (from 1)."""
        jobs = {}
        for number, statement in enumerate(self.statements, start=1):
            if statement.ctas is None:
                continue
            if self.owner is None:
                raise SpecError(
                    f"sql job: statement {number} is a CREATE TABLE ... AS SELECT: give the job an owner (the task "
                    "try), whose marks its table carries until the job has succeeded"
                )
            try:
                jobs[number] = CtasJob(**statement.ctas.job_fields(), owner=self.owner)
            except SpecError as err:
                raise SpecError(f"sql job: statement {number}: {err}") from None
        return jobs

    @property
    def owned_tables(self) -> tuple[str, ...]:
        """The tables the job may create, marked as its owner's: what the task's claim names."""
        return tuple(job.table for job in self.ctas.values())

    @property
    def table_formats(self) -> tuple[str, ...]:
        """The table formats its CTAS statements make tables in, which the catalog must load."""
        return tuple(dict.fromkeys(name for job in self.ctas.values() for name in job.table_formats))

    def _check_ctas(self) -> None:
        """Every CTAS statement reads as a CTAS job, and no two make the same table (the second would find the
        first's unfinished table, and a second replace its swap half done)."""
        first: dict[tuple[str, ...], int] = {}
        for number, job in self.ctas.items():
            name = tuple(part.lower() for part in job.identifier.parts)
            if name in first:
                raise SpecError(
                    f"sql job: statements {first[name]} and {number} both create {job.table} with CREATE TABLE ... "
                    "AS SELECT: create it once, then write to it with INSERT"
                )
            first[name] = number

    def _check_plan_statements(self) -> None:
        """A plan statement that executes a plan has somewhere to keep its checkpoint."""
        for number, statement in enumerate(self.statements, start=1):
            if (
                statement.plan is not None
                and statement.plan.executes
                and (self.plans is None or not self.plans.checkpoints)
            ):
                raise SpecError(
                    f"sql job: statement {number} executes a plan: give the job plans.checkpoints, the root of "
                    "its checkpoints"
                )
