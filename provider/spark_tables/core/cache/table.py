"""Cached tables: intermediate results a DAG author marks as cached (FLIP-36's ``Table.cache()``).

Declaring one runs nothing. The first task of a DAG run whose job uses it computes it and writes it to cache
storage; later tasks of the run read that copy, registered in the run's XComs; the run's end releases it.
A cached table is declared in Python (``CachedTable``, given to an operator's ``caches``) or in SQL
(``CREATE TEMPORARY VIEW name CACHED AS query`` in a SQL job, read by ``utils.sql_reader``); either way, its job
sees it as a temporary view. That a query is a query, not a command, the operator given it checks as the DAG is
parsed (``utils.sql_reader.check_cached_table``).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.row_source import checked_query

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The XCom key under which a task registers the copy of a cached table it wrote.
REGISTRY_KEY_PREFIX = "spark_tables.cache."


@dataclass(frozen=True)
class CachedTable:
    """A result to compute once per DAG run and share between its tasks, under the view ``name``.

    :param name: the temporary view the jobs read it from (letters, digits, underscores).
    :param query: the Spark SQL query that computes it, or
    :param producer: ``package.module:function``, a function of a SparkSession returning its DataFrame.

    Two declarations are the same cache when name and definition are the same (the ``fingerprint``). The copy
    holds every column of the result exactly as declared, whatever a later query reads of it.
    """

    name: str
    query: str | None = None
    producer: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise SpecError(
                f"cached table name {self.name!r} is invalid: it is a view name, use letters, digits and underscores"
            )
        query = checked_query(self.query, self.producer, f"cached table {self.name}")
        object.__setattr__(self, "query", query.strip() if query is not None else None)

    @property
    def fingerprint(self) -> str:
        """Sixteen hex digits of what is cached: another definition under the same name is another cache."""
        definition = json.dumps({"name": self.name, "query": self.query, "producer": self.producer})
        return hashlib.sha256(definition.encode()).hexdigest()[:16]

    @property
    def registry_key(self) -> str:
        return registry_key(self.name)

    def describe(self) -> str:
        return f"{self.name} ({'a query' if self.query is not None else self.producer}, {self.fingerprint})"

    def definition(self) -> str:
        """What computes it, for people: its query, or its producer function's name."""
        return self.query if self.query is not None else f"producer {self.producer}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "query": self.query, "producer": self.producer}

    @classmethod
    def from_dict(cls, data: Any) -> CachedTable:
        if isinstance(data, CachedTable):
            return data
        if not isinstance(data, dict) or not {"name"} <= set(data) <= {"name", "query", "producer"}:
            raise SpecError("cached table: expected an object with name and query or producer")
        return cls(**data)


def registry_key(name: str) -> str:
    """The XCom key under which a task registers the copy of cached table ``name`` it wrote."""
    return REGISTRY_KEY_PREFIX + name
