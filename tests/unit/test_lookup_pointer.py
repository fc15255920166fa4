"""A lookup table's ``CURRENT.json`` is on storage others may write: a pointer names only the table's own snapshots."""

from __future__ import annotations

import datetime
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.snapshot import Pointer, Snapshot, new_version

ROOT = "s3://lookups/customers"
#: A version as ``new_version`` names one, fixed: the parameters below name it, and pytest-xdist's workers must collect
#: the same tests.
VERSION = "v-20261128T000000000000-0a0b0c0d"


def pointer_data(location: str, version: str = VERSION) -> dict:
    snapshot = Snapshot(version, location, 3, 100, "2026-11-28T00:00:00+00:00", "2026-11-28T00:00:01+00:00", 1000)
    return json.loads(json.dumps(Pointer(current=snapshot, loads=1).to_dict()))


def test_the_fixed_version_is_one_new_version_makes() -> None:
    made = new_version(datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC))
    assert made[:-8] == VERSION[:-8] and len(made) == len(VERSION)


def test_a_pointer_at_one_of_the_table_s_snapshots_is_read() -> None:
    pointer = Pointer.from_dict(pointer_data(f"{ROOT}/{VERSION}"), ROOT)
    assert pointer.current is not None and pointer.current.location == f"{ROOT}/{VERSION}"
    assert Pointer.from_dict({"current": None, "loads": 0, "load_failures": 0}, ROOT).current is None


@pytest.mark.parametrize(
    "location",
    ["s3://prod-lake/orders", f"{ROOT}/{VERSION}/..", f"{ROOT}/../other/{VERSION}", f"s3://lookups/accounts/{VERSION}"],
)
def test_a_pointer_elsewhere_is_refused_in_one_line(location: str) -> None:
    with pytest.raises(SpecError) as caught:
        Pointer.from_dict(pointer_data(location), ROOT)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"lookup snapshots {ROOT}: CURRENT.json points at {location!r}")


@given(st.text())
def test_only_the_version_s_own_folder_is_read(location: str) -> None:
    try:
        Pointer.from_dict(pointer_data(location), ROOT)
    except SpecError as err:
        assert "\n" not in str(err)
        assert location != f"{ROOT}/{VERSION}"
    else:
        assert location == f"{ROOT}/{VERSION}"


@given(st.text())
def test_a_version_must_be_a_version_name(version: str) -> None:
    try:
        Pointer.from_dict(pointer_data(f"{ROOT}/{version}", version), ROOT)
    except SpecError:
        pass
    else:
        assert version.startswith("v-") and "/" not in version


@pytest.mark.parametrize("data", [[], {"current": None}, {"current": None, "loads": -1, "load_failures": 0}])
def test_a_damaged_pointer_is_refused_in_one_line(data: object) -> None:
    with pytest.raises(SpecError, match=f"^lookup snapshots {ROOT}: CURRENT.json ") as caught:
        Pointer.from_dict(data, ROOT)
    assert "\n" not in str(caught.value)
