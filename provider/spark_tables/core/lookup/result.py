"""What the ``lookup_join`` and ``lookup_reload`` jobs report: the lookup table, its cache and FLIP-221's metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_tables.core.job_output import JobOutput
from spark_tables.core.lookup.snapshot import Pointer


@dataclass(frozen=True)
class LookupJoinResult(JobOutput):
    """A join's lookup table and cache mode, the rows it enriched into ``output`` (None: counted, not kept) in
    ``batches``, the FLIP's ``metrics``, and with a FULL cache the ``snapshot`` it read, whether it
    ``loaded_snapshot`` itself and the ``table_version`` the snapshot holds.

    Per key (NONE, PARTIAL) each executor Python worker has a cache of its own, and ``metrics`` are their sums (a key
    two workers looked up is a miss in each, and cached by each); ``worker_metrics`` holds each worker's own."""

    kind: ClassVar[str] = "lookup_join"
    KEPT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"output"})
    lookup: str
    cache: str
    rows: int
    output: str | None
    batches: int
    metrics: dict[str, Any]
    snapshot: str | None = None
    loaded_snapshot: bool | None = None
    worker_metrics: list[dict[str, Any]] = field(default_factory=list)
    #: FULL: the version of the table the snapshot holds (``TableVersion``'s fields), for a table with versions.
    table_version: dict[str, Any] | None = None
    #: A Kafka probe with ``on_malformed="skip"``: the messages it left out, by source name (None: none left out).
    malformed_skipped: dict[str, int] | None = None


@dataclass(frozen=True)
class LookupReloadResult(JobOutput):
    """A reload's lookup table, the ``snapshot`` in use after it (None before any load succeeded), the table's
    ``loads`` and ``load_failures`` so far, whether this reload ``loaded`` one itself (False: a concurrent load
    published it, or, ``unchanged``, the table was at the version the snapshot holds), in how many ``attempts``, the
    old snapshots it ``dropped``, and the full cache's metrics."""

    kind: ClassVar[str] = "lookup_reload"
    KEPT_WHEN_NONE: ClassVar[frozenset[str]] = frozenset({"snapshot"})
    lookup: str
    snapshot: dict[str, Any] | None
    loads: int
    load_failures: int
    loaded: bool
    attempts: int
    dropped: list[str]
    metrics: dict[str, Any]
    unchanged: bool = False

    @classmethod
    def of(
        cls,
        lookup: str,
        pointer: Pointer,
        *,
        loaded: bool,
        attempts: int = 0,
        dropped: tuple[str, ...] = (),
        unchanged: bool = False,
    ) -> LookupReloadResult:
        """A reload's result from the pointer it left: the current snapshot, the table's counters, its metrics."""
        return cls(
            lookup=lookup,
            snapshot=pointer.to_dict()["current"],
            loads=pointer.loads,
            load_failures=pointer.load_failures,
            loaded=loaded,
            attempts=attempts,
            dropped=list(dropped),
            metrics=pointer.metrics(),
            unchanged=unchanged,
        )
