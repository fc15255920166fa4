"""The wait for a cached table's copy that another task computes, in Airflow's triggerer.

It watches the claims only: whether a holder still runs, the waiting task asks Airflow itself when the trigger
says it is time to (``check_holder``).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from spark_tables.core.cache.claims import wait_step
from spark_tables.tasks.cache import claims


class CachedTableTrigger(BaseTrigger):
    """Waits, in the triggerer, while claim ``number`` of a cached table (``cache_folder`` in the run folder
    ``run``) is current and not released: until ``check_at``, when the task asks Airflow whether the holder still
    runs, and never past ``deadline`` (both ISO). Fires one event: ``outcome`` (``core.cache.claims.WaitOutcome``),
    ``cache`` and ``cache_folder``."""

    def __init__(
        self,
        *,
        run: str,
        cache_folder: str,
        number: int,
        check_at: str,
        deadline: str,
        poll_seconds: float,
        cache: str,
    ) -> None:
        super().__init__()
        self.run_folder = run
        self.cache_folder = cache_folder
        self.number = number
        self.check_at = check_at
        self.deadline = deadline
        self.poll_seconds = poll_seconds
        self.cache = cache

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "run": self.run_folder,
                "cache_folder": self.cache_folder,
                "number": self.number,
                "check_at": self.check_at,
                "deadline": self.deadline,
                "poll_seconds": self.poll_seconds,
                "cache": self.cache,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        check_at = datetime.datetime.fromisoformat(self.check_at)
        deadline = datetime.datetime.fromisoformat(self.deadline)
        while True:
            claim = await asyncio.to_thread(claims.current, self.run_folder, self.cache_folder)
            outcome = wait_step(self.number, claim, datetime.datetime.now(datetime.UTC), check_at, deadline)
            if outcome is not None:
                self.log.info("cache %s, claim %d: %s", self.cache, self.number, outcome.value)
                yield TriggerEvent({"outcome": outcome.value, "cache": self.cache, "cache_folder": self.cache_folder})
                return
            await asyncio.sleep(self.poll_seconds)
