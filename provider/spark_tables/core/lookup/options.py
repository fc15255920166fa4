"""Lookup join cache options (Flink's FLIP-221): how a lookup table's rows are cached on the executors.

The keys and defaults are Flink's (``lookup.cache``, ``lookup.partial-cache.*``, ``lookup.full-cache.*``), plus
ours, after Flink's lookup hints: ``lookup.shuffle``, ``lookup.async`` and ``lookup.async.capacity``, and the reload
strategy ``ON_CHANGE`` for tables with versions. Values come as text, as in a SQL ``WITH`` clause, or as Python
values.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import TypeVar

from spark_tables.core.durations import format_duration, parse_duration
from spark_tables.core.errors import SpecError


class CacheMode(StrEnum):
    """What a lookup join caches: nothing, the rows of the keys it looked up, or the whole table."""

    NONE = "NONE"
    PARTIAL = "PARTIAL"
    FULL = "FULL"


class ReloadStrategy(StrEnum):
    """When a full cache reloads: every interval, at a time of day, or (ours) when its table's version changes."""

    PERIODIC = "PERIODIC"
    TIMED = "TIMED"
    ON_CHANGE = "ON_CHANGE"


class ScheduleMode(StrEnum):
    """Whether a periodic reload interval counts from the start (rate) or the end (delay) of the last load."""

    FIXED_DELAY = "FIXED_DELAY"
    FIXED_RATE = "FIXED_RATE"


#: ``10:15``, ``10:15:30``, ``10:15:30.5``, each with an optional ``Z`` or ``+07:00``.
_ISO_TIME = re.compile(
    r"(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d{1,6}))?)?"
    r"(?P<offset>Z|(?P<sign>[+-])(?P<offset_hours>\d{2}):(?P<offset_minutes>\d{2})(?::(?P<offset_seconds>\d{2}))?)?",
    re.IGNORECASE,
)
_MAX_OFFSET = timedelta(hours=18)


@dataclass(frozen=True)
class ReloadTime:
    """The time of day of a timed reload, at a fixed UTC offset or (``utc_offset`` None) in the configured zone."""

    time: datetime.time
    utc_offset: timedelta | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.time, datetime.time) or self.time.tzinfo is not None:
            raise SpecError(f"ReloadTime.time={self.time!r} is not a time of day: give a time without tzinfo")
        offset = self.utc_offset
        if offset is not None and (
            not isinstance(offset, timedelta) or abs(offset) > _MAX_OFFSET or offset % timedelta(seconds=1)
        ):
            raise SpecError(
                f"ReloadTime.utc_offset={offset!r} is not a UTC offset: give whole seconds between -18 h and +18 h"
            )

    @classmethod
    def parse(cls, text: str, what: str) -> ReloadTime:
        """The reload time in ISO-8601 ``text``: ``10:15`` (configured zone), ``10:15Z`` (UTC), ``10:15+07:00``."""
        match = _ISO_TIME.fullmatch(text.strip())
        if match is None:
            raise SpecError(
                f"{what}={text!r} is not an ISO-8601 time of day: write HH:MM[:SS[.fff]] with an optional offset "
                "(10:15, 10:15Z, 10:15+07:00)"
            )
        try:
            time_of_day = datetime.time(
                int(match.group("hour")),
                int(match.group("minute")),
                int(match.group("second") or 0),
                int((match.group("fraction") or "0").ljust(6, "0")),
            )
        except ValueError:
            raise SpecError(f"{what}={text!r} is out of range: write a time from 00:00 to 23:59:59") from None
        return cls(time_of_day, _utc_offset(match, text, what))

    def __str__(self) -> str:
        if self.time.microsecond:
            text = self.time.isoformat("microseconds").rstrip("0")
        else:
            text = self.time.isoformat("seconds" if self.time.second else "minutes")
        if self.utc_offset is None:
            return text
        if not self.utc_offset:
            return text + "Z"
        seconds = int(abs(self.utc_offset).total_seconds())
        offset = f"{'-' if self.utc_offset < timedelta(0) else '+'}{seconds // 3600:02d}:{seconds // 60 % 60:02d}"
        return text + offset + (f":{seconds % 60:02d}" if seconds % 60 else "")


def _utc_offset(match: re.Match[str], text: str, what: str) -> timedelta | None:
    if not match.group("offset"):
        return None
    if match.group("offset").upper() == "Z":
        return timedelta(0)
    hours, minutes, seconds = (int(match.group(f"offset_{part}") or 0) for part in ("hours", "minutes", "seconds"))
    offset = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if minutes > 59 or seconds > 59 or offset > _MAX_OFFSET:
        raise SpecError(f"{what}={text!r} has an invalid UTC offset: write one between -18:00 and +18:00")
    return -offset if match.group("sign") == "-" else offset


@dataclass(frozen=True)
class LookupOptions:
    """The lookup cache options of one lookup table, validated on construction.

    Fields take the same values as the options (``LookupOptions(cache="partial", max_rows="1000")`` is fine)
    and hold them normalized. ``max_rows`` counts cached keys, as Flink's (Guava's) ``maximumSize``.
    """

    cache: CacheMode = CacheMode.NONE
    max_retries: int = 3
    expire_after_access: timedelta | None = None
    expire_after_write: timedelta | None = None
    max_rows: int | None = None
    cache_missing_key: bool = True
    reload_strategy: ReloadStrategy = ReloadStrategy.PERIODIC
    reload_interval: timedelta | None = None
    schedule_mode: ScheduleMode = ScheduleMode.FIXED_DELAY
    reload_time: ReloadTime | None = None
    reload_interval_days: int = 1
    shuffle: bool = False
    async_lookup: bool = False
    async_capacity: int = 100

    def __post_init__(self) -> None:
        for name, key in _KEY_OF_FIELD.items():
            object.__setattr__(self, name, _PARSERS[name](getattr(self, name), key))
        if self.cache is CacheMode.PARTIAL and (
            self.max_rows is None and self.expire_after_access is None and self.expire_after_write is None
        ):
            raise SpecError(
                "lookup.cache=PARTIAL needs lookup.partial-cache.max-rows, lookup.partial-cache.expire-after-access "
                "or lookup.partial-cache.expire-after-write: an unbounded cache could exhaust the executor's memory"
            )
        full = self.cache is CacheMode.FULL
        if full and self.reload_strategy is ReloadStrategy.PERIODIC and not self.reload_interval:
            raise SpecError(
                "lookup.cache=FULL with lookup.full-cache.reload-strategy=PERIODIC needs "
                "lookup.full-cache.periodic-reload.interval above zero: set it, e.g. '1 h'"
            )
        if full and self.reload_strategy is ReloadStrategy.TIMED and self.reload_time is None:
            raise SpecError(
                "lookup.cache=FULL with lookup.full-cache.reload-strategy=TIMED needs "
                "lookup.full-cache.timed-reload.iso-time: set a time of day, e.g. '10:15' or '10:15Z'"
            )

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> LookupOptions:
        """The options of a table's ``WITH`` clause or an operator, by Flink's keys."""
        fields: dict[str, object] = {}
        for key, value in options.items():
            if key not in _FIELD_OF_KEY:
                raise SpecError(_unknown_key(key))
            fields[_FIELD_OF_KEY[key]] = value
        return cls(**fields)

    def merged(self, overrides: Mapping[str, object]) -> LookupOptions:
        """These options with ``overrides`` (an operator's, over a table's) taking precedence, checked together."""
        return self.from_options({**self.to_options(), **overrides})

    def to_options(self) -> dict[str, str]:
        """``lookup.cache`` and the options that differ from their defaults, as text ``from_options`` reads back."""
        options: dict[str, str] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "cache" or value != field.default:
                options[_KEY_OF_FIELD[field.name]] = _as_text(value)
        return options


_KEY_OF_FIELD: dict[str, str] = {
    "cache": "lookup.cache",
    "max_retries": "lookup.max-retries",
    "expire_after_access": "lookup.partial-cache.expire-after-access",
    "expire_after_write": "lookup.partial-cache.expire-after-write",
    "max_rows": "lookup.partial-cache.max-rows",
    "cache_missing_key": "lookup.partial-cache.cache-missing-key",
    "reload_strategy": "lookup.full-cache.reload-strategy",
    "reload_interval": "lookup.full-cache.periodic-reload.interval",
    "schedule_mode": "lookup.full-cache.periodic-reload.schedule-mode",
    "reload_time": "lookup.full-cache.timed-reload.iso-time",
    "reload_interval_days": "lookup.full-cache.timed-reload.interval-in-days",
    "shuffle": "lookup.shuffle",
    "async_lookup": "lookup.async",
    "async_capacity": "lookup.async.capacity",
}
_FIELD_OF_KEY = {key: name for name, key in _KEY_OF_FIELD.items()}
_INTEGER = re.compile(r"[+-]?\d+")


def _unknown_key(key: object) -> str:
    known = ", ".join(_FIELD_OF_KEY)
    nearest = difflib.get_close_matches(str(key).lower(), _FIELD_OF_KEY, n=1)
    hint = f": did you mean {nearest[0]}?" if nearest else ""
    return f"unknown lookup option {key!r}{hint} (known options: {known})"


_Enum = TypeVar("_Enum", bound=StrEnum)


def _enum(kind: type[_Enum], description: str) -> Callable[[object, str], _Enum]:
    def parse(value: object, key: str) -> _Enum:
        if isinstance(value, str) and value.strip().upper() in kind.__members__:
            return kind(value.strip().upper())
        raise SpecError(f"{key}={value!r} is not {description}: write one of {', '.join(kind)}")

    return parse


def _integer(minimum: int, *, optional: bool = False) -> Callable[[object, str], int | None]:
    def parse(value: object, key: str) -> int | None:
        if value is None and optional:
            return None
        number = int(value.strip()) if isinstance(value, str) and _INTEGER.fullmatch(value.strip()) else value
        if not isinstance(number, int) or isinstance(number, bool):
            raise SpecError(f"{key}={value!r} is not a whole number: write an integer of {minimum} or more")
        if number < minimum:
            raise SpecError(f"{key}={value!r} is below {minimum}: write an integer of {minimum} or more")
        return number

    return parse


def _boolean(value: object, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise SpecError(f"{key}={value!r} is not a boolean: write true or false")


def _duration(*, positive: bool) -> Callable[[object, str], timedelta | None]:
    def parse(value: object, key: str) -> timedelta | None:
        if value is None:
            return None
        delta = parse_duration(value, key)
        if positive and not delta:
            raise SpecError(f"{key}={value!r} is zero: write a positive duration, or leave the option out")
        return delta

    return parse


def _reload_time(value: object, key: str) -> ReloadTime | None:
    if value is None or isinstance(value, ReloadTime):
        return value
    if not isinstance(value, str):
        raise SpecError(f"{key}={value!r} is not a time of day: write it in ISO-8601 (10:15, 10:15Z, 10:15+07:00)")
    return ReloadTime.parse(value, key)


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    return str(value)


#: How each field reads its option's value; the interval's zero is checked with the cache mode that needs it.
_PARSERS: dict[str, Callable[[object, str], object]] = {
    "cache": _enum(CacheMode, "a cache mode"),
    "max_retries": _integer(0),
    "expire_after_access": _duration(positive=True),
    "expire_after_write": _duration(positive=True),
    "max_rows": _integer(1, optional=True),
    "cache_missing_key": _boolean,
    "reload_strategy": _enum(ReloadStrategy, "a reload strategy"),
    "reload_interval": _duration(positive=False),
    "schedule_mode": _enum(ScheduleMode, "a schedule mode"),
    "reload_time": _reload_time,
    "reload_interval_days": _integer(1),
    "shuffle": _boolean,
    "async_lookup": _boolean,
    "async_capacity": _integer(1),
}
