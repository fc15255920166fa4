"""The processing-time clock the stateful operators read "now" from, in epoch milliseconds.

The operators never read the system time: every expiry decision asks the clock they were built with. In a job
that is the micro-batch's processing time (``BatchClock``); a test gives each available-now run its own
``FixedClock``, so that what expires between two runs does not depend on how long Spark took. Spark's own operators
read the same time from a column (``time_column``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import TimerValues

from spark_tables.core.errors import SpecError


@runtime_checkable
class Clock(Protocol):
    """Picklable: it travels with its operator to the executors."""

    def now_ms(self, timer_values: TimerValues) -> int: ...


@dataclass(frozen=True)
class BatchClock:
    """The processing time Spark gives the current micro-batch: the same for every row and timer of it."""

    def now_ms(self, timer_values: TimerValues) -> int:
        return timer_values.getCurrentProcessingTimeInMs()


@dataclass(frozen=True)
class FixedClock:
    """One instant for every micro-batch of a query run."""

    instant_ms: int

    def __post_init__(self) -> None:
        if not isinstance(self.instant_ms, int) or isinstance(self.instant_ms, bool) or self.instant_ms < 0:
            raise SpecError(f"FixedClock({self.instant_ms!r}) is invalid: give epoch milliseconds, zero or more")

    def now_ms(self, timer_values: TimerValues) -> int:
        return self.instant_ms


def checked_clock(clock: object) -> Clock:
    """``clock`` if it is one; an operator's builder calls this before Spark pickles it."""
    if not isinstance(clock, Clock):
        raise SpecError(f"clock={clock!r} is not a clock: pass BatchClock() or FixedClock(epoch_ms)")
    return clock


def time_column(clock: Clock) -> Column:
    """The clock's time as a timestamp column: ``current_timestamp()`` (in a streaming query, the micro-batch's time,
    the one ``BatchClock`` reads) or the fixed instant."""
    if isinstance(clock, BatchClock):
        return F.current_timestamp()
    if isinstance(clock, FixedClock):
        return F.timestamp_millis(F.lit(clock.instant_ms))
    raise SpecError(f"clock={clock!r} has no time column: Spark's own operators take BatchClock() or FixedClock()")
