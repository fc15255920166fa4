"""When a full lookup cache reloads next: periodic (fixed rate, fixed delay) and timed, across DST changes."""

from __future__ import annotations

from datetime import timedelta

import pendulum
import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.options import LookupOptions
from spark_tables.tasks.lookup.reload_schedule import FailedLoads, LastLoad, next_reload

BERLIN = "Europe/Berlin"


def utc(text: str) -> pendulum.DateTime:
    return pendulum.parse(text + "Z")


def berlin(*fields: int) -> pendulum.DateTime:
    return pendulum.datetime(*fields, tz=BERLIN)


def periodic(mode: str, interval: str = "1 h") -> LookupOptions:
    return LookupOptions.from_options(
        {
            "lookup.cache": "FULL",
            "lookup.full-cache.periodic-reload.interval": interval,
            "lookup.full-cache.periodic-reload.schedule-mode": mode,
        }
    )


def timed(iso_time: str, days: int = 1) -> LookupOptions:
    return LookupOptions.from_options(
        {
            "lookup.cache": "FULL",
            "lookup.full-cache.reload-strategy": "TIMED",
            "lookup.full-cache.timed-reload.iso-time": iso_time,
            "lookup.full-cache.timed-reload.interval-in-days": days,
        }
    )


def first_load(started: pendulum.DateTime) -> LastLoad:
    """A load no schedule fired, of one minute."""
    return LastLoad(started=started, finished=started.add(minutes=1))


def scheduled_load(scheduled_for: pendulum.DateTime) -> LastLoad:
    """A load a schedule fired on time, of one minute."""
    return LastLoad(started=scheduled_for, finished=scheduled_for.add(minutes=1), scheduled_for=scheduled_for)


def due(options: LookupOptions, last: LastLoad | None, now: pendulum.DateTime, timezone: str = BERLIN) -> str:
    """The due instant as UTC ISO text, after checking it is a pendulum DateTime in UTC."""
    instant = next_reload(options, last, now=now, timezone=timezone)
    assert isinstance(instant, pendulum.DateTime)
    assert instant.utcoffset() == timedelta(0)
    return instant.in_timezone("UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


#: A load that started at 10:00 UTC and took 7 minutes.
SEVEN_MINUTES = LastLoad(started=utc("2026-06-01T10:00:00"), finished=utc("2026-06-01T10:07:00"))


class TestPeriodic:
    @pytest.mark.parametrize("options", [periodic("FIXED_RATE"), periodic("FIXED_DELAY"), timed("10:15")])
    def test_without_a_load_the_cache_loads_at_once(self, options):
        now = berlin(2026, 6, 1, 12, 0, 30)
        assert next_reload(options, None, now=now, timezone=BERLIN) == now
        assert due(options, None, now) == "2026-06-01T10:00:30Z"

    def test_fixed_rate_counts_from_the_start_and_fixed_delay_from_the_end(self):
        now = utc("2026-06-01T10:30:00")
        assert due(periodic("FIXED_RATE"), SEVEN_MINUTES, now) == "2026-06-01T11:00:00Z"
        assert due(periodic("FIXED_DELAY"), SEVEN_MINUTES, now) == "2026-06-01T11:07:00Z"

    def test_fixed_delay_past_due_is_returned_as_is(self):
        assert due(periodic("FIXED_DELAY"), SEVEN_MINUTES, utc("2026-06-01T13:25:00")) == "2026-06-01T11:07:00Z"

    @pytest.mark.parametrize(
        ("now", "tick"),
        [
            ("2026-06-01T10:59:59", "2026-06-01T11:00:00Z"),
            ("2026-06-01T11:00:00", "2026-06-01T11:00:00Z"),
            ("2026-06-01T12:00:00", "2026-06-01T12:00:00Z"),
            ("2026-06-01T13:25:00", "2026-06-01T13:00:00Z"),
            ("2026-06-03T09:59:00", "2026-06-03T09:00:00Z"),
        ],
    )
    def test_fixed_rate_skips_missed_ticks_to_the_latest(self, now, tick):
        assert due(periodic("FIXED_RATE"), SEVEN_MINUTES, utc(now)) == tick

    def test_fixed_rate_after_a_load_longer_than_the_interval_is_due_at_once(self):
        slow = LastLoad(started=utc("2026-06-01T10:00:00"), finished=utc("2026-06-01T11:30:00"))
        assert due(periodic("FIXED_RATE"), slow, utc("2026-06-01T11:30:00")) == "2026-06-01T11:00:00Z"

    def test_intervals_are_elapsed_time_across_a_dst_change(self):
        """25 h after noon CET on the eve of spring forward is 14:00 CEST, not 13:00 on the next wall clock day."""
        started = berlin(2026, 3, 28, 12, 0)
        load = LastLoad(started=started, finished=started)
        now = berlin(2026, 3, 28, 18, 0)
        assert due(periodic("FIXED_RATE", "25 h"), load, now) == "2026-03-29T12:00:00Z"
        assert due(periodic("FIXED_DELAY", "PT25H"), load, now) == "2026-03-29T12:00:00Z"

    def test_an_hour_through_the_spring_forward_gap(self):
        load = LastLoad(started=berlin(2026, 3, 29, 1, 30), finished=berlin(2026, 3, 29, 1, 35))
        now = berlin(2026, 3, 29, 1, 40)
        assert due(periodic("FIXED_RATE"), load, now) == "2026-03-29T01:30:00Z"  # 03:30 CEST
        assert due(periodic("FIXED_DELAY"), load, now) == "2026-03-29T01:35:00Z"


class TestTimed:
    def test_with_a_utc_offset_the_timezone_does_not_matter(self):
        options = timed("10:15+07:00")
        before = first_load(utc("2026-06-01T02:00:00"))  # 09:00+07:00
        after = first_load(utc("2026-06-01T04:00:00"))  # 11:00+07:00
        now = utc("2026-06-01T04:01:00")
        assert due(options, before, now) == "2026-06-01T03:15:00Z"
        assert due(options, after, now) == "2026-06-02T03:15:00Z"
        assert due(options, after, now, timezone="America/New_York") == "2026-06-02T03:15:00Z"

    def test_z_is_utc_and_the_first_occurrence_is_strictly_after_the_load(self):
        options = timed("10:15Z")
        assert due(options, first_load(utc("2026-06-01T10:14:59")), utc("2026-06-01T10:16:00")) == (
            "2026-06-01T10:15:00Z"
        )
        assert due(options, first_load(utc("2026-06-01T10:15:00")), utc("2026-06-01T10:16:00")) == (
            "2026-06-02T10:15:00Z"
        )

    def test_without_an_offset_the_configured_zone(self):
        options = timed("10:15")
        summer = first_load(utc("2026-06-01T07:00:00"))  # 09:00 CEST
        winter = first_load(utc("2026-01-15T07:00:00"))  # 08:00 CET
        assert due(options, summer, utc("2026-06-01T07:01:00")) == "2026-06-01T08:15:00Z"
        assert due(options, winter, utc("2026-01-15T07:01:00")) == "2026-01-15T09:15:00Z"
        assert due(options, winter, utc("2026-01-15T07:01:00"), timezone="UTC") == "2026-01-15T10:15:00Z"

    def test_a_first_load_made_after_todays_time_reloads_tomorrow(self):
        load = first_load(berlin(2026, 6, 1, 11, 0))
        assert due(timed("10:15"), load, berlin(2026, 6, 1, 11, 1)) == "2026-06-02T08:15:00Z"

    def test_after_a_first_load_the_next_time_of_day_counts_even_when_long_past(self):
        """The first occurrence after the load, not the latest before now: a value in the past is due now."""
        load = first_load(berlin(2026, 6, 1, 9, 0))
        assert due(timed("10:15"), load, berlin(2026, 6, 3, 12, 0)) == "2026-06-01T08:15:00Z"

    def test_daily_at_10_15_stays_10_15_local_across_spring_forward(self):
        options = timed("10:15")
        last = scheduled_load(berlin(2026, 3, 28, 10, 15))
        assert last.scheduled_for == utc("2026-03-28T09:15:00")
        assert due(options, last, berlin(2026, 3, 28, 10, 16)) == "2026-03-29T08:15:00Z"
        after = scheduled_load(berlin(2026, 3, 29, 10, 15))
        assert due(options, after, berlin(2026, 3, 29, 10, 16)) == "2026-03-30T08:15:00Z"

    def test_daily_at_10_15_stays_10_15_local_across_fall_back(self):
        last = scheduled_load(berlin(2026, 10, 24, 10, 15))
        assert last.scheduled_for == utc("2026-10-24T08:15:00")
        assert due(timed("10:15"), last, berlin(2026, 10, 24, 10, 16)) == "2026-10-25T09:15:00Z"

    def test_missed_occurrences_are_skipped_across_a_dst_change(self):
        last = scheduled_load(berlin(2026, 3, 27, 10, 15))
        assert due(timed("10:15"), last, berlin(2026, 3, 31, 14, 0)) == "2026-03-31T08:15:00Z"
        assert due(timed("10:15"), last, berlin(2026, 3, 31, 10, 14)) == "2026-03-30T08:15:00Z"

    def test_a_time_in_the_spring_forward_gap_moves_forward(self):
        """02:30 does not exist on 2026-03-29 in Berlin: it reloads at 03:30 CEST, then at 02:30 again."""
        options = timed("02:30")
        assert due(options, first_load(berlin(2026, 3, 28, 12, 0)), berlin(2026, 3, 28, 12, 1)) == (
            "2026-03-29T01:30:00Z"
        )
        fired_on_the_eve = scheduled_load(berlin(2026, 3, 28, 2, 30))
        assert due(options, fired_on_the_eve, berlin(2026, 3, 28, 2, 31)) == "2026-03-29T01:30:00Z"
        fired_in_the_gap = scheduled_load(utc("2026-03-29T01:30:00"))
        assert due(options, fired_in_the_gap, utc("2026-03-29T01:31:00")) == "2026-03-30T00:30:00Z"

    def test_a_time_in_the_fall_back_overlap_takes_the_first_instant(self):
        """02:30 happens twice on 2026-10-25 in Berlin: in CEST (00:30 UTC), then in CET (01:30 UTC)."""
        options = timed("02:30")
        assert due(options, first_load(berlin(2026, 10, 24, 12, 0)), berlin(2026, 10, 24, 12, 1)) == (
            "2026-10-25T00:30:00Z"
        )
        fired_on_the_eve = scheduled_load(berlin(2026, 10, 24, 2, 30))
        assert due(options, fired_on_the_eve, berlin(2026, 10, 24, 2, 31)) == "2026-10-25T00:30:00Z"
        fired_first = scheduled_load(utc("2026-10-25T00:30:00"))
        assert due(options, fired_first, utc("2026-10-25T01:45:00")) == "2026-10-26T01:30:00Z"
        manual_between = first_load(utc("2026-10-25T00:45:00"))
        assert due(options, manual_between, utc("2026-10-25T00:50:00")) == "2026-10-26T01:30:00Z"

    @pytest.mark.parametrize(
        ("now", "occurrence"),
        [
            ("2026-06-02T00:00:00", "2026-06-04T10:15:00Z"),
            ("2026-06-04T10:15:00", "2026-06-04T10:15:00Z"),
            ("2026-06-10T10:14:00", "2026-06-07T10:15:00Z"),
            ("2026-06-10T10:15:00", "2026-06-10T10:15:00Z"),
            ("2026-06-12T12:00:00", "2026-06-10T10:15:00Z"),
        ],
    )
    def test_every_three_days_skipping_missed_ones(self, now, occurrence):
        last = scheduled_load(utc("2026-06-01T10:15:00"))
        assert due(timed("10:15Z", days=3), last, utc(now)) == occurrence

    def test_the_chain_follows_the_due_time_not_when_the_load_ran(self):
        late = LastLoad(
            started=utc("2026-06-01T11:00:00"),
            finished=utc("2026-06-01T11:05:00"),
            scheduled_for=utc("2026-06-01T10:15:00"),
        )
        assert due(timed("10:15Z", days=3), late, utc("2026-06-01T11:06:00")) == "2026-06-04T10:15:00Z"


class TestErrors:
    def test_only_a_full_cache_reloads(self):
        with pytest.raises(SpecError, match=r"^lookup\.cache=NONE has no full reload"):
            next_reload(LookupOptions(), None, now=utc("2026-06-01T10:00:00"), timezone=BERLIN)

    def test_an_unknown_time_zone(self):
        with pytest.raises(SpecError, match=r"^timezone='Europe/Bonn' is not a time zone: use an IANA name"):
            next_reload(timed("10:15"), SEVEN_MINUTES, now=utc("2026-06-01T10:30:00"), timezone="Europe/Bonn")

    def test_now_must_be_an_instant(self):
        with pytest.raises(SpecError, match=r"^now=.* is not an instant"):
            next_reload(timed("10:15"), None, now=pendulum.naive(2026, 6, 1), timezone=BERLIN)


class TestLastLoad:
    @pytest.mark.parametrize("scheduled_for", [None, berlin(2026, 3, 29, 10, 15)])
    def test_round_trips_through_a_dict_of_iso_text(self, scheduled_for):
        load = LastLoad(
            started=berlin(2026, 3, 29, 10, 15, 2), finished=berlin(2026, 3, 29, 10, 22, 9), scheduled_for=scheduled_for
        )
        data = load.to_dict()
        assert data["started"] == "2026-03-29T10:15:02+02:00"
        assert data["scheduled_for"] == (None if scheduled_for is None else "2026-03-29T10:15:00+02:00")
        assert LastLoad.from_dict(data) == load

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ([], "expected an object with started, finished and scheduled_for"),
            ({"started": "2026-06-01T10:00:00Z"}, "expected an object"),
            ({"started": "x", "finished": "2026-06-01T10:00:00Z"}, "started='x' is not an ISO-8601 date and time"),
            ({"started": "2026-06-01T10:00:00Z", "finished": "2026-06-01"}, "finished='2026-06-01' is not"),
            (
                {"started": "2026-06-01T10:00:00Z", "finished": "2026-06-01T09:00:00Z"},
                "finished=2026-06-01T09:00:00\\+00:00 is before started",
            ),
        ],
    )
    def test_bad_dicts(self, data, message):
        with pytest.raises(SpecError, match=rf"^last load: {message}"):
            LastLoad.from_dict(data)

    def test_naive_instants_are_rejected(self):
        with pytest.raises(SpecError, match=r"^last load: started=.* is not an instant"):
            LastLoad(started=pendulum.naive(2026, 6, 1), finished=utc("2026-06-01T10:00:00"))


class TestBackoffAfterFailedLoads:
    """After failed loads the next attempt waits, doubling with each failure in a row, within the schedule's bound:
    without it a ``@continuous`` reload DAG would start load after load while the table cannot be read."""

    def failed(self, count: int, finished: pendulum.DateTime, scheduled_for: pendulum.DateTime | None = None):
        return FailedLoads(count=count, finished=finished, scheduled_for=scheduled_for)

    @pytest.mark.parametrize(("count", "minutes"), [(1, 1), (2, 2), (3, 4), (6, 32), (7, 60)])
    def test_the_wait_doubles_up_to_the_periodic_interval(self, count: int, minutes: int) -> None:
        last = first_load(utc("2026-11-22T08:00:00"))  # FIXED_RATE: the 10:00 tick has come, and its reload failed
        now = utc("2026-11-22T10:00:30")
        failing = self.failed(count, finished=utc("2026-11-22T10:00:20"))

        instant = next_reload(periodic("FIXED_RATE"), last, now=now, timezone=BERLIN, failing=failing)

        assert instant == utc("2026-11-22T10:00:20").add(minutes=minutes)

    @pytest.mark.parametrize(("count", "retry"), [(2, "2026-11-22T10:02:00"), (1000, "2026-11-22T11:00:00")])
    def test_a_table_whose_first_loads_failed_backs_off_within_the_interval(self, count: int, retry: str) -> None:
        failing = self.failed(count, finished=utc("2026-11-22T10:00:00"))

        instant = next_reload(
            periodic("FIXED_DELAY"), None, now=utc("2026-11-22T10:00:05"), timezone=BERLIN, failing=failing
        )

        assert instant == utc(retry)

    def test_the_first_backoff_is_a_parameter(self) -> None:
        failing = self.failed(3, finished=utc("2026-11-22T10:00:00"))

        instant = next_reload(
            periodic("FIXED_DELAY", "10 min"),
            None,
            now=utc("2026-11-22T10:00:01"),
            timezone=BERLIN,
            failing=failing,
            failure_backoff=timedelta(seconds=2),
        )

        assert instant == utc("2026-11-22T10:00:08")

    def test_a_failed_timed_reload_is_tried_again_no_later_than_the_next_reload_time(self) -> None:
        options = timed("02:00")
        scheduled_for = berlin(2026, 11, 22, 2, 0)
        last = scheduled_load(berlin(2026, 11, 21, 2, 0))

        soon = self.failed(1, finished=scheduled_for.add(minutes=1), scheduled_for=scheduled_for)
        assert next_reload(options, last, now=scheduled_for.add(minutes=2), timezone=BERLIN, failing=soon) == (
            scheduled_for.add(minutes=2)
        )
        many = self.failed(30, finished=scheduled_for.add(minutes=1), scheduled_for=scheduled_for)
        assert next_reload(options, last, now=scheduled_for.add(minutes=2), timezone=BERLIN, failing=many) == (
            berlin(2026, 11, 23, 2, 0)
        )

    def test_a_failed_load_does_not_bring_a_later_reload_forward(self) -> None:
        last = first_load(utc("2026-11-22T10:00:00"))  # FIXED_RATE: next due 11:00
        failing = self.failed(1, finished=utc("2026-11-22T10:20:00"))  # a manual reload failed in between

        instant = next_reload(
            periodic("FIXED_RATE"), last, now=utc("2026-11-22T10:20:05"), timezone=BERLIN, failing=failing
        )

        assert instant == utc("2026-11-22T11:00:00")

    def test_a_failed_load_record_needs_a_count_and_instants(self) -> None:
        with pytest.raises(SpecError, match=r"failed loads: count=0 is invalid"):
            self.failed(0, finished=utc("2026-11-22T10:00:00"))
        with pytest.raises(SpecError, match=r"failed loads: finished=.* is not an instant"):
            FailedLoads(count=1, finished=pendulum.naive(2026, 11, 22))
