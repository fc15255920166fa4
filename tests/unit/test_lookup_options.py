"""The lookup join cache options (FLIP-221): parsing, defaults, cross-field rules, round trips."""

from __future__ import annotations

import datetime
import re
from datetime import timedelta

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.options import CacheMode, LookupOptions, ReloadStrategy, ReloadTime, ScheduleMode

PARTIAL = {"lookup.cache": "PARTIAL", "lookup.partial-cache.max-rows": "1000"}
PERIODIC = {"lookup.cache": "FULL", "lookup.full-cache.periodic-reload.interval": "1 h"}
TIMED = {
    "lookup.cache": "FULL",
    "lookup.full-cache.reload-strategy": "TIMED",
    "lookup.full-cache.timed-reload.iso-time": "10:15",
}


class TestReloadTime:
    @pytest.mark.parametrize(
        ("text", "time", "offset", "canonical"),
        [
            ("10:15", datetime.time(10, 15), None, "10:15"),
            ("10:15Z", datetime.time(10, 15), timedelta(0), "10:15Z"),
            ("10:15z", datetime.time(10, 15), timedelta(0), "10:15Z"),
            ("10:15+07:00", datetime.time(10, 15), timedelta(hours=7), "10:15+07:00"),
            ("10:15-03:30", datetime.time(10, 15), -timedelta(hours=3, minutes=30), "10:15-03:30"),
            ("10:15:30", datetime.time(10, 15, 30), None, "10:15:30"),
            ("10:15:30.5", datetime.time(10, 15, 30, 500_000), None, "10:15:30.5"),
            ("10:15:30.000001+01:00", datetime.time(10, 15, 30, 1), timedelta(hours=1), "10:15:30.000001+01:00"),
            ("00:00:00", datetime.time(0), None, "00:00"),
            ("23:59:59+00:00:30", datetime.time(23, 59, 59), timedelta(seconds=30), "23:59:59+00:00:30"),
        ],
    )
    def test_iso_times_and_back(self, text, time, offset, canonical):
        reload_time = ReloadTime.parse(text, "iso-time")
        assert reload_time == ReloadTime(time, offset)
        assert str(reload_time) == canonical
        assert ReloadTime.parse(canonical, "iso-time") == reload_time

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("10", "is not an ISO-8601 time of day"),
            ("10.15", "is not an ISO-8601 time of day"),
            ("10:15 CET", "is not an ISO-8601 time of day"),
            ("24:00", "is out of range"),
            ("10:60", "is out of range"),
            ("10:15+19:00", "has an invalid UTC offset"),
            ("10:15+01:75", "has an invalid UTC offset"),
        ],
    )
    def test_bad_times_name_the_option(self, text, message):
        with pytest.raises(SpecError, match=rf"^iso-time='{re.escape(text)}' {message}"):
            ReloadTime.parse(text, "iso-time")

    def test_a_time_with_a_zone_or_an_odd_offset_is_rejected(self):
        with pytest.raises(SpecError, match=r"^ReloadTime\.time="):
            ReloadTime(datetime.time(10, 15, tzinfo=datetime.UTC), None)
        with pytest.raises(SpecError, match=r"^ReloadTime\.utc_offset="):
            ReloadTime(datetime.time(10, 15), timedelta(milliseconds=1))


class TestLookupOptions:
    def test_defaults_are_flinks(self):
        options = LookupOptions.from_options({})
        assert options == LookupOptions()
        assert options.cache is CacheMode.NONE
        assert options.max_retries == 3
        assert options.expire_after_access is None and options.expire_after_write is None
        assert options.max_rows is None
        assert options.cache_missing_key is True
        assert options.reload_strategy is ReloadStrategy.PERIODIC
        assert options.reload_interval is None
        assert options.schedule_mode is ScheduleMode.FIXED_DELAY
        assert options.reload_time is None
        assert options.reload_interval_days == 1
        assert options.shuffle is False
        assert options.async_lookup is False and options.async_capacity == 100

    def test_every_option_from_text(self):
        partial = LookupOptions.from_options(
            {
                "lookup.cache": "partial",
                "lookup.max-retries": "0",
                "lookup.partial-cache.expire-after-access": "10 min",
                "lookup.partial-cache.expire-after-write": "PT1H",
                "lookup.partial-cache.max-rows": " 5000 ",
                "lookup.partial-cache.cache-missing-key": "FALSE",
                "lookup.shuffle": "True",
                "lookup.async": "true",
                "lookup.async.capacity": "16",
            }
        )
        assert partial == LookupOptions(
            cache=CacheMode.PARTIAL,
            max_retries=0,
            expire_after_access=timedelta(minutes=10),
            expire_after_write=timedelta(hours=1),
            max_rows=5000,
            cache_missing_key=False,
            shuffle=True,
            async_lookup=True,
            async_capacity=16,
        )
        full = LookupOptions.from_options(
            {
                "lookup.cache": "Full",
                "lookup.full-cache.reload-strategy": "timed",
                "lookup.full-cache.periodic-reload.interval": "30 s",
                "lookup.full-cache.periodic-reload.schedule-mode": "fixed_rate",
                "lookup.full-cache.timed-reload.iso-time": "10:15+07:00",
                "lookup.full-cache.timed-reload.interval-in-days": "3",
            }
        )
        assert full == LookupOptions(
            cache=CacheMode.FULL,
            reload_strategy=ReloadStrategy.TIMED,
            reload_interval=timedelta(seconds=30),
            schedule_mode=ScheduleMode.FIXED_RATE,
            reload_time=ReloadTime(datetime.time(10, 15), timedelta(hours=7)),
            reload_interval_days=3,
        )

    def test_every_option_from_python_values(self):
        reload_time = ReloadTime(datetime.time(2, 30), None)
        assert LookupOptions.from_options(
            {
                "lookup.cache": CacheMode.FULL,
                "lookup.max-retries": 5,
                "lookup.partial-cache.expire-after-access": timedelta(minutes=1),
                "lookup.partial-cache.expire-after-write": 60_000,
                "lookup.partial-cache.max-rows": 10,
                "lookup.partial-cache.cache-missing-key": False,
                "lookup.full-cache.reload-strategy": ReloadStrategy.TIMED,
                "lookup.full-cache.periodic-reload.interval": timedelta(hours=2),
                "lookup.full-cache.periodic-reload.schedule-mode": ScheduleMode.FIXED_RATE,
                "lookup.full-cache.timed-reload.iso-time": reload_time,
                "lookup.full-cache.timed-reload.interval-in-days": 2,
                "lookup.shuffle": True,
            }
        ) == LookupOptions(
            cache=CacheMode.FULL,
            max_retries=5,
            expire_after_access=timedelta(minutes=1),
            expire_after_write=timedelta(minutes=1),
            max_rows=10,
            cache_missing_key=False,
            reload_strategy=ReloadStrategy.TIMED,
            reload_interval=timedelta(hours=2),
            schedule_mode=ScheduleMode.FIXED_RATE,
            reload_time=reload_time,
            reload_interval_days=2,
            shuffle=True,
        )

    def test_fields_are_normalized_on_direct_construction(self):
        options = LookupOptions(cache="partial", max_rows="7", shuffle="true")
        assert options.cache is CacheMode.PARTIAL and options.max_rows == 7 and options.shuffle is True

    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("lookup.cache", "LRU", "is not a cache mode: write one of NONE, PARTIAL, FULL"),
            ("lookup.cache", 1, "is not a cache mode"),
            ("lookup.max-retries", "three", "is not a whole number: write an integer of 0 or more"),
            ("lookup.max-retries", "-1", "is below 0: write an integer of 0 or more"),
            ("lookup.max-retries", True, "is not a whole number"),
            ("lookup.max-retries", 2.0, "is not a whole number"),
            ("lookup.partial-cache.max-rows", "0", "is below 1: write an integer of 1 or more"),
            ("lookup.partial-cache.max-rows", "1e3", "is not a whole number"),
            ("lookup.partial-cache.expire-after-access", "ten minutes", "is not a duration"),
            ("lookup.partial-cache.expire-after-access", "0 s", "is zero: write a positive duration"),
            ("lookup.partial-cache.expire-after-write", timedelta(0), "is zero: write a positive duration"),
            ("lookup.partial-cache.expire-after-write", "-5 s", "is negative"),
            ("lookup.partial-cache.cache-missing-key", "yes", "is not a boolean: write true or false"),
            ("lookup.partial-cache.cache-missing-key", 1, "is not a boolean"),
            ("lookup.full-cache.reload-strategy", "DAILY", "is not a reload strategy: write one of PERIODIC, TIMED"),
            ("lookup.full-cache.periodic-reload.interval", "P1M", "counts years or months"),
            ("lookup.full-cache.periodic-reload.schedule-mode", "RATE", "is not a schedule mode: write one of"),
            ("lookup.full-cache.timed-reload.iso-time", "quarter past ten", "is not an ISO-8601 time of day"),
            ("lookup.full-cache.timed-reload.iso-time", 1015, "is not a time of day"),
            ("lookup.full-cache.timed-reload.interval-in-days", "0", "is below 1"),
            ("lookup.shuffle", "on", "is not a boolean"),
            ("lookup.async", "yes", "is not a boolean"),
            ("lookup.async.capacity", "0", "is below 1: write an integer of 1 or more"),
        ],
    )
    def test_a_bad_value_names_its_option_and_what_is_allowed(self, key, value, message):
        with pytest.raises(SpecError, match=rf"^{re.escape(key)}={re.escape(repr(value))} {message}") as raised:
            LookupOptions.from_options({**PARTIAL, key: value})
        assert "\n" not in str(raised.value)

    def test_partial_needs_a_bound(self):
        with pytest.raises(SpecError) as raised:
            LookupOptions.from_options({"lookup.cache": "PARTIAL"})
        assert str(raised.value) == (
            "lookup.cache=PARTIAL needs lookup.partial-cache.max-rows, lookup.partial-cache.expire-after-access "
            "or lookup.partial-cache.expire-after-write: an unbounded cache could exhaust the executor's memory"
        )

    @pytest.mark.parametrize(
        "bound",
        [
            {"lookup.partial-cache.max-rows": "1"},
            {"lookup.partial-cache.expire-after-access": "1 s"},
            {"lookup.partial-cache.expire-after-write": "1 s"},
        ],
    )
    def test_partial_with_any_one_bound(self, bound):
        assert LookupOptions.from_options({"lookup.cache": "PARTIAL", **bound}).cache is CacheMode.PARTIAL

    @pytest.mark.parametrize("interval", [{}, {"lookup.full-cache.periodic-reload.interval": "0 s"}])
    def test_full_periodic_needs_a_positive_interval(self, interval):
        with pytest.raises(
            SpecError,
            match=r"^lookup.cache=FULL with lookup.full-cache.reload-strategy=PERIODIC needs "
            r"lookup.full-cache.periodic-reload.interval above zero",
        ):
            LookupOptions.from_options({"lookup.cache": "FULL", **interval})

    def test_an_interval_of_zero_is_fine_when_no_periodic_reload_uses_it(self):
        options = LookupOptions.from_options({"lookup.full-cache.periodic-reload.interval": "0 s"})
        assert options.reload_interval == timedelta(0)
        assert LookupOptions.from_options(options.to_options()) == options

    def test_full_timed_needs_a_time_of_day(self):
        with pytest.raises(
            SpecError,
            match=r"^lookup.cache=FULL with lookup.full-cache.reload-strategy=TIMED needs "
            r"lookup.full-cache.timed-reload.iso-time: set a time of day",
        ):
            LookupOptions.from_options({"lookup.cache": "FULL", "lookup.full-cache.reload-strategy": "TIMED"})

    def test_direct_construction_is_checked_the_same_way(self):
        with pytest.raises(SpecError, match=r"^lookup.cache=PARTIAL needs"):
            LookupOptions(cache=CacheMode.PARTIAL)
        with pytest.raises(SpecError, match=r"^lookup.max-retries=-1 is below 0"):
            LookupOptions(max_retries=-1)

    def test_an_unknown_key_suggests_the_nearest_and_lists_the_known_ones(self):
        with pytest.raises(SpecError) as raised:
            LookupOptions.from_options({"lookup.partial-cache.max-row": "10"})
        message = str(raised.value)
        assert message.startswith(
            "unknown lookup option 'lookup.partial-cache.max-row': did you mean lookup.partial-cache.max-rows? "
            "(known options: lookup.cache, lookup.max-retries, "
        )
        assert message.endswith("lookup.shuffle, lookup.async, lookup.async.capacity)")
        assert "\n" not in message

    def test_an_unknown_key_far_from_any_has_no_suggestion(self):
        with pytest.raises(SpecError, match=r"^unknown lookup option 'connector' \(known options: lookup.cache, "):
            LookupOptions.from_options({"connector": "jdbc"})

    @pytest.mark.parametrize(
        "options",
        [
            LookupOptions(),
            LookupOptions(cache=CacheMode.PARTIAL, max_rows=1, max_retries=0, cache_missing_key=False, shuffle=True),
            LookupOptions(cache=CacheMode.NONE, async_lookup=True, async_capacity=7),
            LookupOptions(
                cache=CacheMode.PARTIAL,
                expire_after_access=timedelta(microseconds=1500),
                expire_after_write=timedelta(days=2),
            ),
            LookupOptions(cache=CacheMode.FULL, reload_interval=timedelta(hours=1)),
            LookupOptions(
                cache=CacheMode.FULL, reload_interval=timedelta(seconds=90), schedule_mode=ScheduleMode.FIXED_RATE
            ),
            LookupOptions(
                cache=CacheMode.FULL,
                reload_strategy=ReloadStrategy.TIMED,
                reload_time=ReloadTime(datetime.time(10, 15, 30, 250_000), -timedelta(hours=9, minutes=30)),
                reload_interval_days=3,
            ),
        ],
    )
    def test_to_options_round_trips(self, options):
        assert LookupOptions.from_options(options.to_options()) == options

    def test_to_options_holds_the_cache_mode_and_what_differs_from_the_defaults(self):
        assert LookupOptions().to_options() == {"lookup.cache": "NONE"}
        options = LookupOptions.from_options(
            {**TIMED, "lookup.full-cache.timed-reload.iso-time": "10:15Z", "lookup.max-retries": "3"}
        )
        assert options.to_options() == {
            "lookup.cache": "FULL",
            "lookup.full-cache.reload-strategy": "TIMED",
            "lookup.full-cache.timed-reload.iso-time": "10:15Z",
        }
        assert (
            LookupOptions.from_options({**PARTIAL, "lookup.partial-cache.expire-after-access": "10 min"}).to_options()[
                "lookup.partial-cache.expire-after-access"
            ]
            == "600000 ms"
        )

    def test_merged_overrides_the_table_options(self):
        table = LookupOptions.from_options({**PERIODIC, "lookup.max-retries": "5"})
        merged = table.merged({"lookup.full-cache.periodic-reload.interval": "10 min", "lookup.shuffle": True})
        assert merged == LookupOptions(
            cache=CacheMode.FULL, max_retries=5, reload_interval=timedelta(minutes=10), shuffle=True
        )
        assert table.merged({}) == table

    def test_merged_checks_the_result(self):
        table = LookupOptions.from_options(PERIODIC)
        assert table.merged({"lookup.cache": "NONE"}).cache is CacheMode.NONE
        with pytest.raises(SpecError, match=r"^lookup.cache=PARTIAL needs"):
            table.merged({"lookup.cache": "PARTIAL"})
        with pytest.raises(SpecError, match=r"^lookup.cache=FULL with lookup.full-cache.reload-strategy=TIMED needs"):
            table.merged({"lookup.full-cache.reload-strategy": "TIMED"})
        with pytest.raises(SpecError, match=r"^unknown lookup option 'lookup.shufle': did you mean lookup.shuffle\?"):
            table.merged({"lookup.shufle": "true"})
