"""A task that needs a cached table's copy another task of its run is computing defers until that copy is there
(single flight, ``core.cache.claims``): it waits in the triggerer (``triggers.cached_table``), then prepares again.
"""

from __future__ import annotations

from typing import Any, NoReturn

import pendulum
from airflow.sdk import Context

from spark_tables.core.cache.claims import WaitOutcome
from spark_tables.core.cache.layout import cache_folder_name
from spark_tables.tasks.cache.uses import CacheWaits, CopyBeingComputed
from spark_tables.triggers.cached_table import CachedTableTrigger
from spark_tables.utils import settings

#: How often a task waiting for a cached table's copy looks at its claim, in the triggerer.
_CLAIM_POLL_SECONDS = 2.0


class CacheWaitMixin:
    """``SparkJobOperator``'s waits for the copies of cached tables that other tasks compute."""

    def _wait_for_copy(self, busy: CopyBeingComputed, waits: CacheWaits) -> NoReturn:
        """Defer until the task computing ``busy``'s table is done with it (or was lost, or the bound has passed)."""
        now = pendulum.now("UTC")
        waits = waits.waiting(busy, now.isoformat())
        deadline = pendulum.parse(waits.since[cache_folder_name(busy.table)]) + settings.cache_wait_timeout()
        self.log.info(
            "cache %s: waiting, deferred, for its copy: %s, at most until %s", busy.table.name, busy, deadline
        )
        trigger = CachedTableTrigger(
            run=busy.run,
            cache_folder=cache_folder_name(busy.table),
            number=busy.claim.number,
            check_at=min(now + settings.cache_wait_check_interval(), deadline).isoformat(),
            deadline=deadline.isoformat(),
            poll_seconds=_CLAIM_POLL_SECONDS,
            cache=busy.table.name,
        )
        self.defer(trigger=trigger, method_name="execute_after_waiting", kwargs={"waits": waits.to_dict()})

    def execute_after_waiting(self, context: Context, event: Any = None, waits: dict[str, Any] | None = None) -> Any:
        """Resumed after waiting for a cached table's copy: prepare again (a hit now, a takeover, or another wait)."""
        event = event or {}
        past_bound = event.get("outcome") == WaitOutcome.TIMED_OUT.value
        self.log.info("cache %s: done waiting (%s)", event.get("cache"), event.get("outcome"))
        if past_bound:
            self.log.warning("cache %s: waited past [spark_tables] cache_wait_timeout: computes it", event["cache"])
        now = pendulum.now("UTC").isoformat()
        self._cache_waits = CacheWaits.from_dict(waits).resumed(event.get("cache_folder", ""), now, past_bound)
        return self.execute(context)


def cache_writers(context: Context) -> list[str]:
    """The tasks of this DAG that can register a copy of a cached table: this provider's job operators (each of
    them a ``CacheWaitMixin``)."""
    return [task.task_id for task in context["dag"].tasks if isinstance(task, CacheWaitMixin)]
