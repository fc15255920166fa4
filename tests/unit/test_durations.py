"""Durations as Flink's ``TimeUtils.parseDuration`` reads them, nanoseconds rounded up to a microsecond."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from spark_tables.core.durations import format_duration, parse_duration, whole_milliseconds
from spark_tables.core.errors import SpecError

WHAT = "lookup.partial-cache.expire-after-access"

#: Flink's labels as its ``TimeUtils.TimeUnit`` lists them (flink-core, org.apache.flink.util), and what one is.
FLINK_UNITS = [
    (("d", "day", "days"), timedelta(days=1)),
    (("h", "hour", "hours"), timedelta(hours=1)),
    (("min", "m", "minute", "minutes"), timedelta(minutes=1)),
    (("s", "sec", "secs", "second", "seconds"), timedelta(seconds=1)),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), timedelta(milliseconds=1)),
    (("µs", "micro", "micros", "microsecond", "microseconds"), timedelta(microseconds=1)),
]
FLINK_NANOSECONDS = ("ns", "nano", "nanos", "nanosecond", "nanoseconds")
#: How Flink reads a number and its label: next to each other, spaced, in any case, the whole trimmed.
SPELLINGS = ("{n}{unit}", "{n} {unit}", " {n}\t{unit} ", "{n}  {UNIT}", "{n}{Unit}")


def _spelled(number: int, label: str) -> list[str]:
    return [
        spelling.format(n=number, unit=label, UNIT=label.upper(), Unit=label.capitalize()) for spelling in SPELLINGS
    ]


class TestParseDuration:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            *((f"2{unit}", timedelta(days=2)) for unit in ("d", "day", "days")),
            *((f"2 {unit}", timedelta(hours=2)) for unit in ("h", "hour", "hours")),
            *((f"10 {unit}", timedelta(minutes=10)) for unit in ("min", "m", "minute", "minutes")),
            *((f"30 {unit}", timedelta(seconds=30)) for unit in ("s", "sec", "secs", "second", "seconds")),
            *((f"1500 {unit}", timedelta(seconds=1.5)) for unit in ("ms", "milli", "millis", "millisecond")),
            ("1500 milliseconds", timedelta(seconds=1.5)),
            *(
                (f"250 {unit}", timedelta(microseconds=250))
                for unit in ("us", "µs", "micro", "micros", "microsecond", "microseconds")
            ),
            *((f"3000{unit}", timedelta(microseconds=3)) for unit in ("ns", "nano", "nanos", "nanosecond")),
            ("3000 nanoseconds", timedelta(microseconds=3)),
        ],
    )
    def test_every_flink_unit_spelling(self, text, expected):
        assert parse_duration(text, WHAT) == expected

    @pytest.mark.parametrize("text", ["10 MIN", "10Min", " 10   min ", "10 Minutes", "10m", "10 M"])
    def test_units_ignore_case_and_spaces(self, text):
        assert parse_duration(text, WHAT) == timedelta(minutes=10)

    @pytest.mark.parametrize("value", ["600000", " 600000 ", 600_000])
    def test_a_number_without_a_unit_is_milliseconds(self, value):
        assert parse_duration(value, WHAT) == timedelta(minutes=10)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("PT10M", timedelta(minutes=10)),
            ("pt10m", timedelta(minutes=10)),
            ("PT1H30M", timedelta(hours=1, minutes=30)),
            ("P1DT2H", timedelta(days=1, hours=2)),
            ("P1D", timedelta(days=1)),
            ("P2W", timedelta(weeks=2)),
            ("PT0.5S", timedelta(milliseconds=500)),
            ("PT0,25S", timedelta(milliseconds=250)),
            ("PT1.5H", timedelta(minutes=90)),
            ("P1DT2H3M4.000005S", timedelta(days=1, hours=2, minutes=3, seconds=4, microseconds=5)),
            ("PT0S", timedelta(0)),
            ("+PT2S", timedelta(seconds=2)),  # as Java's Duration.parse: a sign on the whole or on each part
            ("PT1H-30M", timedelta(minutes=30)),
            ("P1DT-1H", timedelta(hours=23)),
            ("-PT-1H", timedelta(hours=1)),
            ("PT+5M", timedelta(minutes=5)),
            ("PT1.S", timedelta(seconds=1)),
        ],
    )
    def test_iso_8601_durations(self, text, expected):
        assert parse_duration(text, WHAT) == expected

    def test_a_timedelta_is_taken_as_is_and_zero_is_allowed(self):
        assert parse_duration(timedelta(seconds=7), WHAT) == timedelta(seconds=7)
        assert parse_duration("0 ms", WHAT) == timedelta(0)

    @pytest.mark.parametrize(
        ("value", "message"),
        [
            ("P1M", "counts years or months, whose length is not fixed: write days"),
            ("P1Y", "counts years or months, whose length is not fixed: write days"),
            ("P1Y2DT3H", "counts years or months"),
            ("-5 s", "is negative: write a duration of zero or more"),
            ("-PT5S", "is negative"),
            ("PT-0.5S", "is negative"),
            ("P-1D", "is negative"),
            (-1, "is negative"),
            (timedelta(seconds=-1), "is negative"),
            ("ten minutes", 'is not a duration: write a number with a unit ("10 min", "3600000 ms", "1 h")'),
            ("5 parsecs", "has an unknown unit 'parsecs'"),
            ("", "is not a duration"),
            ("P", "is not a duration"),
            ("PT", "is not a duration"),
            ("P1DT", "is not a duration"),
            ("1.5 h", "is not a duration"),
            ("PT1.5H30M", "has a fraction before its last part"),
            ("999999999999 d", "is too long"),
            ("   ", "is not a duration"),
            ("10 mins", "has an unknown unit 'mins'"),  # Flink's min and m have no plural
            ("10 ms s", "is not a duration"),
            ("1 hs", "has an unknown unit 'hs'"),
            ("\u0663 s", "is not a duration"),  # an Arabic-Indic three: Flink reads ASCII digits only
            ("9223372036854775808 ms", "is too long"),  # past Java's long, and a timedelta's 999999999 days
            pytest.param("1" * 5000, "is too long", id="5000 digits"),  # past Python's int() limit: still one line
            ("PT0.0000000001S", "is finer than a nanosecond"),
            (True, "is not a duration"),
            (1.5, "is not a duration"),
            (None, "is not a duration"),
        ],
    )
    def test_rejects_name_the_option(self, value, message):
        with pytest.raises(SpecError, match=rf"^{WHAT}=.* {re.escape(message)}") as raised:
            parse_duration(value, WHAT)
        assert "\n" not in str(raised.value)

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            (
                "ten minutes",
                "lookup.partial-cache.expire-after-access='ten minutes' is not a duration: write a number with a unit "
                '("10 min", "3600000 ms", "1 h") or ISO-8601 ("PT10M")',
            ),
            (  # an unknown unit is told every accepted one
                "5 parsecs",
                "lookup.partial-cache.expire-after-access='5 parsecs' has an unknown unit 'parsecs': use days (d, "
                "day, days), hours (h, hour, hours), minutes (min, m, minute, minutes), seconds (s, sec, secs, "
                "second, seconds), milliseconds (ms, milli, millis, millisecond, milliseconds), microseconds (µs, "
                "us, μs, micro, micros, microsecond, microseconds), nanoseconds (ns, nano, nanos, nanosecond, "
                "nanoseconds), or none for milliseconds",
            ),
        ],
    )
    def test_the_message_of_an_unreadable_duration(self, text, message):
        with pytest.raises(SpecError) as raised:
            parse_duration(text, WHAT)
        assert str(raised.value) == message

    @pytest.mark.parametrize(
        ("delta", "text"),
        [
            (timedelta(minutes=10), "600000 ms"),
            (timedelta(microseconds=1500), "1500 us"),
            (timedelta(0), "0 ms"),
            (timedelta(days=3, microseconds=1), "259200000001 us"),
        ],
    )
    def test_format_duration_reads_back_exactly(self, delta, text):
        assert format_duration(delta) == text
        assert parse_duration(text, WHAT) == delta


class TestFlinkSpellings:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [(text, 7 * one) for labels, one in FLINK_UNITS for label in labels for text in _spelled(7, label)],
    )
    def test_every_flink_label_in_every_spacing_and_case(self, text, expected):
        assert parse_duration(text, WHAT) == expected

    @pytest.mark.parametrize("text", [text for label in FLINK_NANOSECONDS for text in _spelled(7000, label)])
    def test_every_flink_nanosecond_label(self, text):
        assert parse_duration(text, WHAT) == timedelta(microseconds=7)

    def test_leading_zeros_are_read_as_flink_reads_them(self):
        assert parse_duration("0" * 40 + "15 s", WHAT) == timedelta(seconds=15)


class TestNanosecondsRoundUp:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("0 ns", timedelta(0)),
            ("1 ns", timedelta(microseconds=1)),
            ("999 ns", timedelta(microseconds=1)),
            ("1000 ns", timedelta(microseconds=1)),
            ("1001 ns", timedelta(microseconds=2)),
            ("1500 ns", timedelta(microseconds=2)),
            ("86400000000001 ns", timedelta(days=1, microseconds=1)),
            ("PT0.000000001S", timedelta(microseconds=1)),
            ("PT0.0000015S", timedelta(microseconds=2)),
            ("PT0.123456789S", timedelta(microseconds=123_457)),
            ("P1DT0.000000001S", timedelta(days=1, microseconds=1)),
        ],
    )
    def test_to_the_next_microsecond(self, text, expected):
        assert parse_duration(text, WHAT) == expected

    def test_a_positive_duration_never_becomes_zero(self):
        for nanos in range(1, 2_001):
            delta = parse_duration(f"{nanos} ns", WHAT)
            assert delta > timedelta(0), nanos
            assert whole_milliseconds(delta) >= 1, nanos

    @pytest.mark.parametrize("text", ["-1 ns", "-999 ns", "PT-0.000000001S", "-PT0.000000001S"])
    def test_a_negative_one_is_refused_not_rounded_to_zero(self, text):
        with pytest.raises(SpecError, match=rf"^{WHAT}='{re.escape(text)}' is negative"):
            parse_duration(text, WHAT)

    @pytest.mark.parametrize(("text", "shown"), [("1 ns", "1 us"), ("1500 ns", "2 us"), ("2000000 ns", "2 ms")])
    def test_what_is_written_back_reads_back_the_same(self, text, shown):
        delta = parse_duration(text, WHAT)
        assert format_duration(delta) == shown
        assert parse_duration(shown, WHAT) == delta

    @pytest.mark.parametrize(
        ("delta", "milliseconds"),
        [
            (timedelta(0), 0),
            (timedelta(microseconds=1), 1),
            (timedelta(microseconds=999), 1),
            (timedelta(milliseconds=1), 1),
            (timedelta(microseconds=1001), 2),
            (timedelta(days=1), 86_400_000),
        ],
    )
    def test_whole_milliseconds_round_up(self, delta, milliseconds):
        assert whole_milliseconds(delta) == milliseconds
