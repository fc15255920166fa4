from __future__ import annotations

import re

import pytest

from spark_tables.core.exchange import local_path, result_uri

_TRY = {"dag_id": "sales", "run_id": "scheduled__2026-01-01", "task_id": "load", "map_index": -1, "try_number": 1}


def test_result_uri_is_one_flat_file_under_the_root():
    uri = result_uri("file:///srv/exchange", **_TRY)

    assert re.fullmatch(r"file:///srv/exchange/sales__scheduled__2026-01-01__load__-1__1__[0-9a-f]{12}\.json", uri)


def test_result_uri_ignores_a_trailing_slash_on_the_root():
    assert result_uri("s3://bucket/x/", **_TRY) == result_uri("s3://bucket/x", **_TRY)


def test_result_uri_replaces_unsafe_characters():
    uri = result_uri(
        "s3://bucket/exchange",
        dag_id="team/dag",
        run_id="manual__2026-01-01T00:00:00+00:00",
        task_id="group.task id",
        map_index=3,
        try_number=2,
    )

    name = uri.removeprefix("s3://bucket/exchange/")
    assert re.fullmatch(r"team_dag__manual__2026-01-01T00_00_00_00_00__group\.task_id__3__2__[0-9a-f]{12}\.json", name)


def test_result_uri_stays_unique_when_parts_differ_only_where_they_are_reduced():
    one = result_uri("file:///x", **{**_TRY, "dag_id": "a__b", "task_id": "c"})
    other = result_uri("file:///x", **{**_TRY, "dag_id": "a", "task_id": "b__c"})
    assert one != other
    assert result_uri("file:///x", **{**_TRY, "task_id": "a.b"}) != result_uri(
        "file:///x", **{**_TRY, "task_id": "a/b"}
    )


@pytest.mark.parametrize("change", [{"try_number": 2}, {"map_index": 0}, {"map_index": 1}, {"task_id": "other"}])
def test_result_uri_differs_between_tries_and_mapped_tasks(change):
    assert result_uri("file:///x", **_TRY) != result_uri("file:///x", **{**_TRY, **change})


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("file:///srv/exchange/r.json", "/srv/exchange/r.json"),
        ("file:/srv/exchange/r.json", "/srv/exchange/r.json"),
        ("file://localhost/srv/exchange/r.json", "/srv/exchange/r.json"),
        ("file://otherhost/srv/exchange/r.json", None),
        ("/srv/exchange/r.json", "/srv/exchange/r.json"),
        ("relative/r.json", "relative/r.json"),
        ("s3://bucket/key.json", None),
        ("hdfs://namenode/exchange/r.json", None),
    ],
)
def test_local_path(uri, path):
    assert local_path(uri) == path
