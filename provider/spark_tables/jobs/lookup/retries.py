"""Retries with exponential backoff for lookups: the framework's, where Flink left them to each connector."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from spark_tables.core.errors import one_line

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Seconds between attempts: ``first``, then ``factor`` times the delay before, never more than ``cap``."""

    first: float = 0.1
    factor: float = 2.0
    cap: float = 5.0

    def __post_init__(self) -> None:
        if self.first < 0 or self.cap < 0 or self.factor < 1:
            raise ValueError(f"{self}: delays cannot be negative and the factor cannot be below 1")

    def delays(self, max_retries: int) -> list[float]:
        """The delay before each retry."""
        if max_retries < 0:
            raise ValueError(f"max_retries is {max_retries}: it cannot be negative")
        return [min(self.first * self.factor**retry, self.cap) for retry in range(max_retries)]


def _log_retry(what: str, attempt: int, attempts: int, delay: float, error: Exception) -> None:
    log.warning("%s: attempt %d of %d failed, retrying in %.3g s: %s", what, attempt, attempts, delay, one_line(error))


def retrying(
    call: Callable[[], T],
    *,
    max_retries: int,
    backoff: Backoff = Backoff(),
    sleep: Callable[[float], None] = time.sleep,
    what: str = "lookup",
) -> T:
    """What ``call`` returns, calling it up to ``1 + max_retries`` times; the last attempt's error is raised."""
    delays = backoff.delays(max_retries)
    for attempt, delay in enumerate(delays, start=1):
        try:
            return call()
        except Exception as error:
            _log_retry(what, attempt, len(delays) + 1, delay, error)
        sleep(delay)
    return call()


async def retrying_async(
    call: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    backoff: Backoff = Backoff(),
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    what: str = "lookup",
) -> T:
    """``retrying`` for coroutines: awaits ``call()`` and ``sleep``."""
    delays = backoff.delays(max_retries)
    for attempt, delay in enumerate(delays, start=1):
        try:
            return await call()
        except Exception as error:
            _log_retry(what, attempt, len(delays) + 1, delay, error)
        await sleep(delay)
    return await call()
