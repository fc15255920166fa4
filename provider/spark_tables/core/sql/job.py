"""The ``sql`` job kind: Spark SQL statements run in order in one application."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from spark_tables.core.errors import SpecError
from spark_tables.core.statements import strip_leading_comments

MAX_RESULT_ROWS_LIMIT = 10_000


@dataclass(frozen=True)
class SqlJob:
    """Statements run in order; the rows of the last one, if it returns rows, come back capped."""

    kind: ClassVar[str] = "sql"
    statements: tuple[str, ...]
    max_result_rows: int = 100

    def __post_init__(self) -> None:
        if isinstance(self.statements, str) or not isinstance(self.statements, list | tuple):
            raise SpecError("sql job: statements must be a list of SQL strings; split a script on ';'")
        statements = tuple(self.statements)
        if not statements:
            raise SpecError("sql job: no statements given: pass at least one SQL statement")
        for index, statement in enumerate(statements, start=1):
            if not isinstance(statement, str) or not strip_leading_comments(statement).strip():
                raise SpecError(f"sql job: statement {index} is empty: remove it or give its SQL text")
        object.__setattr__(self, "statements", statements)
        if (
            isinstance(self.max_result_rows, bool)
            or not isinstance(self.max_result_rows, int)
            or not 0 <= self.max_result_rows <= MAX_RESULT_ROWS_LIMIT
        ):
            raise SpecError(
                f"sql job: max_result_rows={self.max_result_rows!r} is invalid: use a whole number from 0 "
                f"to {MAX_RESULT_ROWS_LIMIT}"
            )
