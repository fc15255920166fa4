"""Durations as Flink's ``TimeUtils.parseDuration`` reads them: ``10 min``, ``3600000`` (milliseconds), ``PT10M``.

Python's timedelta, like Spark, holds whole microseconds: a duration finer than that (``1500 ns``) is rounded up to
the next microsecond, so that a positive duration never becomes zero (a TTL of zero means no expiry).

Pure Python: Spark executors read these too.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

from spark_tables.core.errors import SpecError

#: Flink's unit labels (``TimeUtils.TimeUnit``: a label, and for most its plural with "s"), compared in lower
#: case, plus ``us`` and ``μs`` (Greek mu) for microseconds. The nanoseconds in one of each unit.
_UNITS: dict[str, tuple[int, tuple[str, ...]]] = {
    "days": (86_400 * 10**9, ("d", "day", "days")),
    "hours": (3_600 * 10**9, ("h", "hour", "hours")),
    "minutes": (60 * 10**9, ("min", "m", "minute", "minutes")),
    "seconds": (10**9, ("s", "sec", "secs", "second", "seconds")),
    "milliseconds": (10**6, ("ms", "milli", "millis", "millisecond", "milliseconds")),
    "microseconds": (10**3, ("µs", "us", "μs", "micro", "micros", "microsecond", "microseconds")),  # micro sign, mu
    "nanoseconds": (1, ("ns", "nano", "nanos", "nanosecond", "nanoseconds")),
}
_NANOS_PER_LABEL = {label: nanos for nanos, labels in _UNITS.values() for label in labels}
_UNIT_NAMES = ", ".join(f"{unit} ({', '.join(labels)})" for unit, (_, labels) in _UNITS.items())
#: Flink's form: a whole number (ASCII digits, as Flink reads them) and an optional unit (none: milliseconds).
_WITH_UNIT = re.compile(r"(?P<sign>[+-]?)\s*(?P<number>[0-9]+)\s*(?P<unit>[^0-9\s]*)", re.ASCII)
#: More digits than any duration a timedelta holds (fewer than 10**23 ns), leading zeros aside.
_MAX_DIGITS = 24
#: One part of an ISO-8601 duration as Java's ``Duration.parse`` reads it: a sign of its own, and a fraction
#: (Java: only of the seconds).
_NUMBER = r"[+-]?[0-9]+(?:[.,][0-9]*)?"
_ISO = re.compile(
    rf"(?P<sign>[+-]?)P(?:(?P<weeks>{_NUMBER})W|(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?=[-+0-9])(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?)",
    re.IGNORECASE,
)
#: The date part of an ISO duration that counts years or months.
_ISO_YEARS_OR_MONTHS = re.compile(r"[+-]?P[^T]*\d[YM]", re.IGNORECASE)
_ISO_NANOS = {
    "weeks": 7 * 86_400 * 10**9,
    "days": 86_400 * 10**9,
    "hours": 3_600 * 10**9,
    "minutes": 60 * 10**9,
    "seconds": 10**9,
}
_NANOS_PER_MICRO = 1_000
_HOW = 'write a number with a unit ("10 min", "3600000 ms", "1 h") or ISO-8601 ("PT10M")'


def parse_duration(value: object, what: str) -> timedelta:
    """The duration ``value`` gives for option ``what``: a timedelta, a number of milliseconds, or text.

    Text is what Flink's ``TimeUtils.parseDuration`` reads: a whole number with one of Flink's units (``d``, ``h``,
    ``min``/``m``, ``s``, ``ms``, ``µs``, ``ns`` and their long spellings, in any case; none means milliseconds),
    or an ISO-8601 duration as Java's ``Duration.parse`` reads it (days, hours, minutes, seconds); weeks, and a
    fraction of the last part whatever its unit, are read too. Zero is accepted; a negative duration is not. A
    duration finer than a microsecond is rounded up to the next microsecond.
    """
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise _negative(value, what)
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return _from_nanos(value * 10**6, value, what)
    if isinstance(value, str):
        return _parse_text(value.strip(), value, what)
    raise SpecError(f"{what}={value!r} is not a duration: {_HOW}")


def format_duration(delta: timedelta) -> str:
    """``delta`` (zero or more) as text that ``parse_duration`` reads back exactly: ``600000 ms``, ``1500 us``."""
    micros = delta // timedelta(microseconds=1)
    return f"{micros // 1000} ms" if micros % 1000 == 0 else f"{micros} us"


def whole_milliseconds(delta: timedelta) -> int:
    """``delta`` in milliseconds, rounded up: a positive duration never counts as 0 ms (no expiry, no wait)."""
    return -(-delta // timedelta(milliseconds=1))


def _parse_text(text: str, value: str, what: str) -> timedelta:
    if match := _WITH_UNIT.fullmatch(text):
        unit = match.group("unit").lower() or "ms"
        if unit not in _NANOS_PER_LABEL:
            raise SpecError(
                f"{what}={value!r} has an unknown unit {match.group('unit')!r}: "
                f"use {_UNIT_NAMES}, or none for milliseconds"
            )
        number = match.group("number").lstrip("0")
        if len(number) > _MAX_DIGITS:
            raise _too_long(value, what)
        nanos = int(number or "0") * _NANOS_PER_LABEL[unit]
        return _from_nanos(-nanos if match.group("sign") == "-" else nanos, value, what)
    if _ISO_YEARS_OR_MONTHS.match(text):
        raise SpecError(f"{what}={value!r} counts years or months, whose length is not fixed: write days (P30D)")
    match = _ISO.fullmatch(text)
    parts = {name: number for name, number in match.groupdict().items() if number and name != "sign"} if match else {}
    if not parts:
        raise SpecError(f"{what}={value!r} is not a duration: {_HOW}")
    numbers = [Decimal(number.replace(",", ".")) for number in parts.values()]
    if any(number != number.to_integral_value() for number in numbers[:-1]):
        raise SpecError(f"{what}={value!r} has a fraction before its last part: only the last part may have one")
    nanos = sum(number * _ISO_NANOS[name] for name, number in zip(parts, numbers, strict=True))
    if nanos != nanos.to_integral_value():
        raise SpecError(f"{what}={value!r} is finer than a nanosecond: write at most 9 decimals of seconds")
    return _from_nanos(-int(nanos) if match.group("sign") == "-" else int(nanos), value, what)


def _from_nanos(nanos: int, value: object, what: str) -> timedelta:
    """The timedelta of ``nanos`` (checked not negative before rounding: -1 ns must not pass as 0)."""
    if nanos < 0:
        raise _negative(value, what)
    try:
        return timedelta(microseconds=-(-nanos // _NANOS_PER_MICRO))
    except OverflowError:
        raise _too_long(value, what) from None


def _negative(value: object, what: str) -> SpecError:
    return SpecError(f"{what}={_shown(value)} is negative: write a duration of zero or more")


def _too_long(value: object, what: str) -> SpecError:
    return SpecError(f"{what}={_shown(value)} is too long: write fewer than 999999999 days")


def _shown(value: object) -> str:
    return str(value) if isinstance(value, timedelta) else repr(value)
