"""The plan statements, as the Airflow side read them (``tasks.sql_reader``): the words around the plan's URI, as
Flink spells them.

```
COMPILE PLAN [IF NOT EXISTS] '<uri>' FOR INSERT INTO ... | STATEMENT SET BEGIN INSERT ...; INSERT ...; END
COMPILE AND EXECUTE PLAN '<uri>' FOR ...
EXECUTE PLAN [IF EXISTS] '<uri>'
EXPLAIN PLAN '<uri>'
```

What follows ``FOR`` is Spark SQL: its INSERT statements, split, which the compiler parses on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from spark_tables.core.errors import SpecError

ACTIONS = ("compile", "compile_and_execute", "execute", "explain")


@dataclass(frozen=True)
class PlanStatement:
    """One plan statement: what to do (``compile``, ``compile_and_execute``, ``execute``, ``explain``), the plan's
    URI, for a compile its INSERT statement(s) (a statement set's, one each), and its text as written."""

    action: str
    uri: str
    inserts: tuple[str, ...] = ()
    if_not_exists: bool = False
    if_exists: bool = False
    #: As written, for people; two statements that say the same are equal however they are written.
    text: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise SpecError(f"plan statement: action {self.action!r} is invalid: use one of {', '.join(ACTIONS)}")
        if not isinstance(self.uri, str) or not self.uri.strip():
            raise SpecError("the plan's URI is empty: give a path, a file:// URI or an object storage URI (s3://...)")
        if isinstance(self.inserts, str) or not isinstance(self.inserts, list | tuple):
            raise SpecError("plan statement: inserts must be a list of INSERT statements")
        object.__setattr__(self, "inserts", tuple(self.inserts))
        if self.compiles != bool(self.inserts) or not all(isinstance(insert, str) for insert in self.inserts):
            raise SpecError("plan statement: a compile, and only a compile, has its INSERT statements")

    @property
    def compiles(self) -> bool:
        return self.action in ("compile", "compile_and_execute")

    @property
    def executes(self) -> bool:
        return self.action in ("execute", "compile_and_execute")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> PlanStatement:
        if isinstance(data, PlanStatement):
            return data
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or not {"action", "uri"} <= set(data) <= known:
            raise SpecError(f"plan statement: expected an object with action and uri, and only {sorted(known)}")
        return cls(**data)


def shown(text: str, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` characters, for messages and logs."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
