"""A ``CREATE TABLE ... AS SELECT`` statement's parts, as the Airflow side read them (``tasks.sql_reader``)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from spark_tables.core.errors import SpecError


@dataclass(frozen=True)
class CtasStatement:
    """What a CTAS statement says: its table (as written), query, flags, and the clauses it gives (None: not given).
    ``CREATE OR REPLACE`` and ``REPLACE`` both mean ``replace``. ``CtasJob`` checks the values."""

    table: str
    query: str
    if_not_exists: bool = False
    replace: bool = False
    format: str | None = None
    partitioned_by: tuple[str, ...] | None = None
    properties: dict[str, str] | None = None
    location: str | None = None
    comment: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.table, str) or not isinstance(self.query, str):
            raise SpecError("CTAS statement: table and query must be strings")
        if not isinstance(self.if_not_exists, bool) or not isinstance(self.replace, bool):
            raise SpecError("CTAS statement: if_not_exists and replace must be true or false")
        if self.partitioned_by is not None:
            if isinstance(self.partitioned_by, str) or not isinstance(self.partitioned_by, list | tuple):
                raise SpecError("CTAS statement: partitioned_by must be a list of column names")
            object.__setattr__(self, "partitioned_by", tuple(self.partitioned_by))

    def job_fields(self) -> dict[str, Any]:
        """The ``CtasJob`` fields the statement gives: table, query, the flags, and each clause it names."""
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        if "partitioned_by" in given:
            given["partitioned_by"] = list(given["partitioned_by"])
        return given

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> CtasStatement:
        if isinstance(data, CtasStatement):
            return data
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or not {"table", "query"} <= set(data) <= known:
            raise SpecError(f"CTAS statement: expected an object with table and query, and only {sorted(known)}")
        return cls(**data)
