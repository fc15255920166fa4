"""The aggregate calls a group-aggregate node computes: ``COUNT(*)``, ``COUNT(DISTINCT x)``, ``SUM(x)``, ...

Each reads one column of the node's input (the compiler projects expressions into columns first) and writes one
output column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spark_tables.core.errors import SpecError

#: The aggregate functions a group-aggregate node computes, as the plan spells them.
FUNCTIONS = ("count", "sum", "min", "max", "avg")


@dataclass(frozen=True)
class AggregateCall:
    """``function(DISTINCT? column) AS output``; ``column`` is None only for ``COUNT(*)``."""

    function: str
    column: str | None
    output: str
    distinct: bool = False

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise SpecError(f"aggregate {self.function!r} is not supported: use one of {', '.join(FUNCTIONS)}")
        if self.column is None and (self.function != "count" or self.distinct):
            raise SpecError(f"aggregate {self.function}(*) is invalid: only COUNT(*) takes no column")
        if not isinstance(self.output, str) or not self.output:
            raise SpecError(f"aggregate {self.function}: give the name of its output column")

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "column": self.column, "output": self.output, "distinct": self.distinct}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> AggregateCall:
        if not isinstance(data, dict) or not {"function", "column", "output"} <= set(data):
            raise SpecError(f"{where}: an aggregate must be an object with function, column and output")
        return cls(
            function=data["function"], column=data["column"], output=data["output"], distinct=bool(data.get("distinct"))
        )

    def describe(self) -> str:
        inner = "*" if self.column is None else ("DISTINCT " if self.distinct else "") + self.column
        return f"{self.function.upper()}({inner}) AS {self.output}"
