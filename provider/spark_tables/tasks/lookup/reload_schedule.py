"""When a full lookup cache is next due to reload, from its options and its last load (Airflow side).

Every instant is given explicitly; nothing here reads the clock. Arithmetic runs on stdlib datetimes in UTC:
pendulum adds a timedelta's days on the wall clock, and its intervals do not divide by a timedelta.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

import pendulum

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.options import CacheMode, LookupOptions, ReloadStrategy, ScheduleMode
from spark_tables.core.lookup.snapshot import FailedReloads, Snapshot

_UTC = datetime.UTC
_LAST_LOAD_FIELDS = ("started", "finished", "scheduled_for")


@dataclass(frozen=True)
class LastLoad:
    """The last load of a full cache: when it started and finished, and the due time it ran for.

    ``scheduled_for`` is None for a first or a manual load, which no schedule fired.
    """

    started: pendulum.DateTime
    finished: pendulum.DateTime
    scheduled_for: pendulum.DateTime | None = None

    def __post_init__(self) -> None:
        for name in _LAST_LOAD_FIELDS:
            instant = getattr(self, name)
            if instant is not None and (not isinstance(instant, datetime.datetime) or instant.utcoffset() is None):
                raise SpecError(f"last load: {name}={instant!r} is not an instant: give a datetime with a time zone")
        if self.finished < self.started:
            raise SpecError(
                f"last load: finished={self.finished.isoformat()} is before started={self.started.isoformat()}: "
                "give when the load ended"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "started": self.started.isoformat(),
            "finished": self.finished.isoformat(),
            "scheduled_for": self.scheduled_for.isoformat() if self.scheduled_for is not None else None,
        }

    @classmethod
    def of(cls, snapshot: Snapshot) -> LastLoad:
        """The load of a published snapshot."""
        return cls.from_dict(
            {"started": snapshot.started, "finished": snapshot.finished, "scheduled_for": snapshot.scheduled_for}
        )

    @classmethod
    def from_dict(cls, data: Any) -> LastLoad:
        if not isinstance(data, dict) or not {"started", "finished"} <= set(data) <= set(_LAST_LOAD_FIELDS):
            raise SpecError("last load: expected an object with started, finished and scheduled_for")
        scheduled_for = data.get("scheduled_for")
        return cls(
            started=_parse_instant(data["started"], "started"),
            finished=_parse_instant(data["finished"], "finished"),
            scheduled_for=_parse_instant(scheduled_for, "scheduled_for") if scheduled_for is not None else None,
        )


@dataclass(frozen=True)
class FailedLoads:
    """The loads of a full cache that failed in a row since the last one that published: how many, when the
    latest ended, and the due time it ran for (None for a first or manual load)."""

    count: int
    finished: pendulum.DateTime
    scheduled_for: pendulum.DateTime | None = None

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise SpecError(f"failed loads: count={self.count!r} is invalid: it counts at least one failed load")
        for name in ("finished", "scheduled_for"):
            instant = getattr(self, name)
            if instant is not None and (not isinstance(instant, datetime.datetime) or instant.utcoffset() is None):
                raise SpecError(f"failed loads: {name}={instant!r} is not an instant: give a datetime with a time zone")

    @classmethod
    def of(cls, failing: FailedReloads) -> FailedLoads:
        """From the pointer's record of the failing loads."""
        scheduled_for = failing.scheduled_for
        return cls(
            count=failing.count,
            finished=_parse_instant(failing.finished, "finished", "failed loads"),
            scheduled_for=(
                _parse_instant(scheduled_for, "scheduled_for", "failed loads") if scheduled_for is not None else None
            ),
        )


#: The wait after a first failed load; it doubles with each further failure in a row.
DEFAULT_FAILURE_BACKOFF = datetime.timedelta(minutes=1)
#: Doublings beyond which the backoff has long passed any interval (and a timedelta would overflow).
_MAX_DOUBLINGS = 40


def next_reload(
    options: LookupOptions,
    last: LastLoad | None,
    *,
    now: pendulum.DateTime,
    timezone: str,
    failing: FailedLoads | None = None,
    failure_backoff: datetime.timedelta = DEFAULT_FAILURE_BACKOFF,
) -> pendulum.DateTime:
    """The instant, in UTC, the next full reload is due; one at or before ``now`` means it is due now.

    No load yet: ``now``. PERIODIC counts exact elapsed time: FIXED_DELAY from the end of the last load, FIXED_RATE
    from its start, keeping to its ticks and skipping missed ones (the latest tick at or before ``now``). TIMED
    reloads at the reload time of day on the wall clock of ``timezone`` (an IANA name, as Airflow's
    ``[core] default_timezone``), or of the time's own UTC offset when it has one: interval-in-days local days
    after the due time of a scheduled load, skipping missed ones as FIXED_RATE does; after a first or manual
    load, at the first occurrence after its start.

    ON_CHANGE reloads when the table's version changes: due from the end of the last load, the version deciding
    (``LookupReloadSensor`` compares it, as it does at each PERIODIC or TIMED time for a table with versions).

    After loads that ``failing`` (the schedule's time had come, or there was no snapshot yet), the next attempt
    waits ``failure_backoff`` after the latest failure, doubled for each further failure in a row, but never
    longer than the reload interval (PERIODIC and ON_CHANGE: the failure backoff alone) or past the next reload
    time after the failed one (TIMED).
    """
    if options.cache is not CacheMode.FULL:
        raise SpecError(f"lookup.cache={options.cache} has no full reload: reloads are for lookup.cache=FULL")
    if now.utcoffset() is None:
        raise SpecError(f"now={now!r} is not an instant: give a datetime with a time zone")
    current = _utc(now)
    if last is None:
        due = current
    elif options.reload_strategy is ReloadStrategy.ON_CHANGE:
        due = _utc(last.finished)
    elif options.reload_strategy is ReloadStrategy.TIMED:
        due = _next_timed(options, last, current, timezone)
    elif options.schedule_mode is ScheduleMode.FIXED_DELAY:
        due = _utc(last.finished) + options.reload_interval
    else:
        due = _latest_tick(_utc(last.started), options.reload_interval, current)
    if failing is not None:
        due = max(due, retry_after(options, failing, now=current, timezone=timezone, backoff=failure_backoff))
    return pendulum.instance(due)


def retry_after(
    options: LookupOptions,
    failing: FailedLoads,
    *,
    now: datetime.datetime,
    timezone: str,
    backoff: datetime.timedelta = DEFAULT_FAILURE_BACKOFF,
) -> datetime.datetime:
    """When a load may be tried again after ``failing``: ``backoff`` doubled ``count - 1`` times after the latest
    failure, bounded by the reload interval (PERIODIC) or the next reload time after the failed one (TIMED)."""
    failed = _utc(failing.finished)
    seconds = backoff.total_seconds() * 2.0 ** min(failing.count - 1, _MAX_DOUBLINGS)
    if options.reload_strategy is ReloadStrategy.TIMED:
        failed_load = LastLoad(started=failed, finished=failed, scheduled_for=failing.scheduled_for)
        bound = _next_timed(options, failed_load, max(now, failed), timezone) - failed
    elif options.reload_strategy is ReloadStrategy.ON_CHANGE:
        return failed + datetime.timedelta(seconds=seconds)
    else:
        bound = options.reload_interval
    return failed + datetime.timedelta(seconds=min(seconds, bound.total_seconds()))


def next_check(options: LookupOptions, unchanged: pendulum.DateTime, *, timezone: str) -> pendulum.DateTime:
    """The next reload time after ``unchanged``, a reload time at which the table's version was the one its
    snapshot holds (so nothing was loaded): one interval on (PERIODIC, both schedule modes: the check took no
    time), the next time of day (TIMED, counted as after a scheduled load). ON_CHANGE has no reload times: its
    sensor watches the version."""
    if options.reload_strategy is ReloadStrategy.ON_CHANGE:
        raise SpecError("lookup.full-cache.reload-strategy=ON_CHANGE has no reload times: the version is watched")
    moment = _utc(unchanged)
    if options.reload_strategy is ReloadStrategy.TIMED:
        checked = LastLoad(started=moment, finished=moment, scheduled_for=moment)
        return pendulum.instance(_next_timed(options, checked, moment, timezone))
    return pendulum.instance(moment + options.reload_interval)


def _latest_tick(start: datetime.datetime, interval: datetime.timedelta, now: datetime.datetime) -> datetime.datetime:
    """The latest tick ``start + k * interval`` (k >= 1) at or before ``now``, or the first tick if none is."""
    return start + max(1, (now - start) // interval) * interval


def _next_timed(options: LookupOptions, last: LastLoad, now: datetime.datetime, timezone: str) -> datetime.datetime:
    reload_time = options.reload_time
    zone = _zone(timezone) if reload_time.utc_offset is None else datetime.timezone(reload_time.utc_offset)

    def occurrence(day: datetime.date) -> datetime.datetime:
        """The reload time on ``day``'s wall clock: fold 0 takes the earlier of an ambiguous time, and moves
        a time in a spring-forward gap forward by the gap (02:30 becomes 03:30), as pendulum does."""
        return datetime.datetime.combine(day, reload_time.time, tzinfo=zone).astimezone(_UTC)

    if last.scheduled_for is None:
        started = _utc(last.started)
        day = started.astimezone(zone).date()
        while occurrence(day) <= started:
            day += datetime.timedelta(days=1)
        return occurrence(day)
    every = datetime.timedelta(days=options.reload_interval_days)
    first = _utc(last.scheduled_for).astimezone(zone).date() + every
    if occurrence(first) > now:
        return occurrence(first)
    count = max(0, (now.astimezone(zone).date() - first) // every)
    while occurrence(first + count * every) > now:  # at most once or twice: time of day and DST shifts
        count -= 1
    while occurrence(first + (count + 1) * every) <= now:
        count += 1
    return occurrence(first + count * every)


def _zone(name: str) -> datetime.tzinfo:
    try:
        return pendulum.timezone(name)
    except (ValueError, TypeError):
        raise SpecError(
            f"timezone={name!r} is not a time zone: use an IANA name such as Europe/Berlin, or UTC"
        ) from None


def _utc(instant: datetime.datetime) -> datetime.datetime:
    """``instant`` as a plain stdlib datetime in UTC, for exact arithmetic."""
    utc = instant.astimezone(_UTC)
    return datetime.datetime(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond, tzinfo=_UTC
    )


def _parse_instant(text: object, name: str, record: str = "last load") -> pendulum.DateTime:
    try:
        instant = pendulum.parse(text, exact=True) if isinstance(text, str) else None
    except ValueError:
        instant = None
    if not isinstance(instant, pendulum.DateTime):
        raise SpecError(f"{record}: {name}={text!r} is not an ISO-8601 date and time: write one with its offset")
    return instant
