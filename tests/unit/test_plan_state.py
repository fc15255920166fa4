"""A stateful node's state entries: defaults from table.exec.state.ttl, validation, a join's single entry."""

from __future__ import annotations

from datetime import timedelta

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.state import StateEntry, default_entries, default_ttl, parse_entries

JOIN = ("leftState", "rightState")


def test_defaults_come_from_the_jobs_state_ttl_and_are_written_in_milliseconds() -> None:
    ttl = default_ttl({"table.exec.state.ttl": "1 h"})
    entries = default_entries(JOIN, ttl)
    assert [entry.to_dict() for entry in entries] == [
        {"index": 0, "ttl": "3600000 ms", "name": "leftState"},
        {"index": 1, "ttl": "3600000 ms", "name": "rightState"},
    ]
    assert default_ttl({}) == timedelta(0)  # Flink's default: no expiry


def test_entries_read_back_with_each_input_its_own_ttl() -> None:
    entries = parse_entries(
        [{"index": 1, "ttl": "1 d", "name": "rightState"}, {"index": 0, "ttl": "0 ms", "name": "leftState"}],
        JOIN,
        "node 4",
    )
    assert entries == (StateEntry(0, timedelta(0), "leftState"), StateEntry(1, timedelta(days=1), "rightState"))
    assert [entry.ttl_ms for entry in entries] == [0, 86_400_000]


def test_a_joins_single_entry_applies_to_both_sides() -> None:
    entries = parse_entries([{"index": 0, "ttl": "20 s", "name": "state"}], JOIN, "node 4")
    assert [(entry.index, entry.ttl_ms, entry.name) for entry in entries] == [
        (0, 20_000, "state"),
        (1, 20_000, "rightState"),
    ]


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ([{"index": 0, "ttl": "-1 ms"}, {"index": 1, "ttl": "1 s"}], "is negative"),
        ([{"index": 0, "ttl": "abc"}, {"index": 1, "ttl": "1 s"}], "is not a duration"),
        ([{"index": 0, "ttl": "1 s"}, {"index": 0, "ttl": "2 s"}], "index 0 is given twice"),
        ([{"index": 0, "ttl": "1 s"}, {"index": 2, "ttl": "2 s"}], "are not 0 to 1"),
        ([{"index": 0, "ttl": "1 s"}, {"index": 1, "ttl": "1 s"}, {"index": 2, "ttl": "1 s"}], "3 state entries for 2"),
        ([{"index": -1, "ttl": "1 s"}, {"index": 1, "ttl": "1 s"}], "index -1 is invalid"),
        ([{"index": 0, "ttl": "1 s", "retention": 3}, {"index": 1, "ttl": "1 s"}], "unknown field(s) ['retention']"),
        ([], "non-empty list"),
        ([{"index": 1, "ttl": "1 s"}], "1 state entries for 2"),
    ],
)
def test_bad_entries_fail_with_one_line_naming_the_node(state: list, message: str) -> None:
    with pytest.raises(SpecError) as raised:
        parse_entries(state, JOIN, "plan node 4 (stream-exec-join)")
    assert message in str(raised.value)
    assert str(raised.value).startswith("plan node 4 (stream-exec-join)")
    assert "\n" not in str(raised.value)


def test_a_bad_job_ttl_fails_with_the_options_name() -> None:
    with pytest.raises(SpecError, match=r"table\.exec\.state\.ttl='1 fortnight' has an unknown unit"):
        default_ttl({"table.exec.state.ttl": "1 fortnight"})


@pytest.mark.parametrize(("ttl", "ttl_ms", "written"), [("1 ns", 1, "1 us"), ("1500 us", 2, "1500 us")])
def test_a_ttl_finer_than_a_millisecond_rounds_up_and_still_expires(ttl: str, ttl_ms: int, written: str) -> None:
    (entry,) = default_entries(("state",), default_ttl({"table.exec.state.ttl": ttl}))
    assert entry.ttl_ms == ttl_ms  # never 0, which would mean no expiry
    assert entry.to_dict()["ttl"] == written
    assert parse_entries([entry.to_dict()], ("state",), "node 2") == (entry,)
