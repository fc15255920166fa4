"""One statement of a ``sql`` job, as the Airflow side read it (``tasks.sql_reader``): its text and what it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_tables.core.ctas.statement import CtasStatement
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.plan.statements import PlanStatement, shown


@dataclass(frozen=True)
class SqlStatement:
    """A statement's text, run as written, and what the reader found it is.

    :param summary: the statement on one line from its first word, cut, for logs.
    :param writes: the table it creates or writes rows into (None for queries and other commands).
    :param ctas: its parts when it is a ``CREATE TABLE ... AS SELECT`` (it runs with CTAS's lifecycle).
    :param plan: its parts when it is a plan statement (it runs as the plan job does).
    """

    text: str
    summary: str = ""
    writes: str | None = None
    ctas: CtasStatement | None = None
    plan: PlanStatement | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise SpecError("is empty: remove it or give its SQL text")
        if not self.summary:
            object.__setattr__(self, "summary", shown(self.text, 80))
        if self.writes is not None:
            try:
                object.__setattr__(self, "writes", str(TableIdentifier.parse(self.writes)))
            except SpecError as err:
                raise SpecError(f"writes a table by an {err}") from None
        if self.ctas is not None:
            object.__setattr__(self, "ctas", CtasStatement.from_dict(self.ctas))
        if self.plan is not None:
            object.__setattr__(self, "plan", PlanStatement.from_dict(self.plan))
        if self.ctas is not None and self.plan is not None:
            raise SpecError("is read as both a CTAS and a plan statement: it is one or the other")

    @classmethod
    def from_dict(cls, data: Any) -> SqlStatement:
        """A statement from the job spec; a bare string is a plain statement, read as nothing in particular (no
        table written, no CTAS lifecycle, no plan): read SQL with ``tasks.sql_reader.read_statements``."""
        if isinstance(data, SqlStatement):
            return data
        if isinstance(data, str):
            return cls(text=data)
        known = {"text", "summary", "writes", "ctas", "plan"}
        if not isinstance(data, dict) or not {"text"} <= set(data) <= known:
            raise SpecError(
                "is not a read statement: give an object with text (and summary, writes, ctas, plan), as "
                "spark_tables.tasks.sql_reader.read_statements makes"
            )
        return cls(**data)
