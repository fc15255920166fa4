"""Durations as Flink's options take them: ``10 min``, ``3600000`` (milliseconds), or ISO-8601 ``PT10M``.

Pure Python: Spark executors read these too.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

from spark_tables.core.errors import SpecError

_NANOS_PER_UNIT: dict[str, int] = {
    **dict.fromkeys(("d", "day", "days"), 86_400 * 10**9),
    **dict.fromkeys(("h", "hour", "hours"), 3_600 * 10**9),
    **dict.fromkeys(("min", "m", "minute", "minutes"), 60 * 10**9),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 10**9),
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 10**6),
    **dict.fromkeys(("us", "µs", "μs", "micro", "micros", "microsecond", "microseconds"), 10**3),  # micro sign, mu
    **dict.fromkeys(("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1),
}
#: Flink's form: a whole number and an optional unit (none: milliseconds).
_WITH_UNIT = re.compile(r"(?P<sign>[+-]?)\s*(?P<number>\d+)\s*(?P<unit>[^\d\s]*)")
_NUMBER = r"\d+(?:[.,]\d+)?"
_ISO = re.compile(
    rf"(?P<sign>[+-]?)P(?:(?P<weeks>{_NUMBER})W|(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?=\d)(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?)",
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
_HOW = 'write a number with a unit ("10 min", "3600000 ms", "1 h") or ISO-8601 ("PT10M")'


def parse_duration(value: object, what: str) -> timedelta:
    """The duration ``value`` gives for option ``what``: a timedelta, a number of milliseconds, or text.

    Text is a whole number with one of Flink's units (``d``, ``h``, ``min``, ``s``, ``ms``, ``us``, ``ns`` and
    their long spellings; none means milliseconds) or an ISO-8601 duration in weeks, days, hours, minutes and
    seconds. Zero is accepted; a negative duration is not.
    """
    if isinstance(value, timedelta):
        delta = value
    elif isinstance(value, int) and not isinstance(value, bool):
        delta = _from_nanos(value * 10**6, value, what)
    elif isinstance(value, str):
        delta = _parse_text(value.strip(), value, what)
    else:
        raise SpecError(f"{what}={value!r} is not a duration: {_HOW}")
    if delta < timedelta(0):
        raise SpecError(f"{what}={_shown(value)} is negative: write a duration of zero or more")
    return delta


def format_duration(delta: timedelta) -> str:
    """``delta`` (zero or more) as text that ``parse_duration`` reads back exactly: ``600000 ms``, ``1500 us``."""
    micros = delta // timedelta(microseconds=1)
    return f"{micros // 1000} ms" if micros % 1000 == 0 else f"{micros} us"


def _parse_text(text: str, value: str, what: str) -> timedelta:
    if match := _WITH_UNIT.fullmatch(text):
        unit = match.group("unit").lower() or "ms"
        if unit not in _NANOS_PER_UNIT:
            raise SpecError(f"{what}={value!r} has an unknown unit {match.group('unit')!r}: {_HOW}")
        nanos = int(match.group("number")) * _NANOS_PER_UNIT[unit]
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
    if nanos % 1000:
        raise SpecError(f"{what}={_shown(value)} is finer than a microsecond: write a whole number of microseconds")
    try:
        return timedelta(microseconds=nanos // 1000)
    except OverflowError:
        raise SpecError(f"{what}={_shown(value)} is too long: write fewer than 999999999 days") from None


def _shown(value: object) -> str:
    return str(value) if isinstance(value, timedelta) else repr(value)
