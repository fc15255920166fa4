"""Cached tables: intermediate results a DAG author marks as cached (FLIP-36's ``Table.cache()``).

Declaring one runs nothing. The first task of a DAG run whose job uses it computes it and writes it to cache
storage; later tasks of the run read that copy, registered in the run's XComs; the run's end releases it.
A cached table is declared in Python (``CachedTable``, given to an operator's ``caches``) or in SQL
(``CREATE TEMPORARY VIEW name CACHED AS query`` in a SQL job, read by ``tasks.sql_reader``); either way, its job
sees it as a temporary view. That a query is a query, not a command, the operator given it checks as the DAG is
parsed (``tasks.sql_reader.check_cached_table``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import PLAIN_NAME
from spark_tables.core.row_source import checked_row_source

#: A cache name: it names folders and views.
#: Where a copy is kept: files under the cache root, which any application reads; or the memory of the Spark Connect
#: server a session-mode job runs on (``CACHE TABLE`` of a global temporary view), which only its later sessions read.
FILES, MEMORY = "files", "memory"
#: What a declaration may ask for: ``auto`` is memory in session mode and files in per-job mode.
STORAGES = ("auto", MEMORY, FILES)
#: The XCom key under which a task registers the copy of a cached table it wrote.
REGISTRY_KEY_PREFIX = "spark_tables.cache."


@dataclass(frozen=True)
class CachedTable:
    """A result to compute once per DAG run and share between its tasks, under the view ``name``.

    :param name: the temporary view the jobs read it from (letters, digits, underscores).
    :param query: the Spark SQL query that computes it, or
    :param producer: ``package.module:function``, a function of a SparkSession returning its DataFrame.
    :param storage: where the copy is kept: ``auto`` (the default: in the server's memory in session mode, on files
        in per-job mode), ``memory`` (session mode only) or ``files`` (for a table larger than the server's memory).

    Two declarations are the same cache when name and definition are the same (the ``fingerprint``), wherever they
    keep it. The copy holds every column of the result exactly as declared, whatever a later query reads of it.
    """

    name: str
    query: str | None = None
    producer: str | None = None
    storage: str = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not PLAIN_NAME.fullmatch(self.name):
            raise SpecError(
                f"cached table name {self.name!r} is invalid: it is a view name, use letters, digits and underscores"
            )
        query = checked_row_source(self.query, self.producer, f"cached table {self.name}")
        object.__setattr__(self, "query", query.strip() if query is not None else None)
        if self.storage not in STORAGES:
            raise SpecError(
                f"cached table {self.name}: storage {self.storage!r} is not one of {', '.join(STORAGES)}: use auto "
                "unless the table must be kept on files (larger than the server's memory) or in memory"
            )

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

    def storage_in(self, server: str | None) -> str:
        """Where a task's job keeps the copy it writes, ``files`` or ``memory``: ``server`` is the Spark connection
        of the Spark Connect server the job runs on, None in per-job mode, where memory is refused in one line."""
        if self.storage == "auto":
            return MEMORY if server is not None else FILES
        if self.storage == MEMORY and server is None:
            raise SpecError(
                f"cached table {self.name}: storage 'memory' keeps it in a Spark Connect server's memory, and this "
                "task's Spark connection starts an application per job, whose memory ends with it: use storage "
                "'auto' or 'files', or a connection of type spark_connect"
            )
        return self.storage

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "query": self.query, "producer": self.producer, "storage": self.storage}

    @classmethod
    def from_dict(cls, data: Any) -> CachedTable:
        if isinstance(data, CachedTable):
            return data
        if not isinstance(data, dict) or not {"name"} <= set(data) <= {"name", "query", "producer", "storage"}:
            raise SpecError("cached table: expected an object with name, query or producer, and storage")
        return cls(**data)


def registry_key(name: str) -> str:
    """The XCom key under which a task registers the copy of cached table ``name`` it wrote."""
    return REGISTRY_KEY_PREFIX + name
