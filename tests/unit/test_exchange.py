from __future__ import annotations

import re

import pytest

from spark_tables.core.exchange import cancel_uri, claim_uri, local_path, result_uri

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


def test_cancel_uri_is_a_marker_beside_the_result():
    uri = result_uri("file:///srv/exchange", **_TRY)

    assert cancel_uri(uri) == uri.removesuffix(".json") + ".cancel"
    assert cancel_uri("s3://bucket/exchange/r.json") == "s3://bucket/exchange/r.cancel"


def test_cancel_uri_differs_from_the_result_and_between_tries():
    one = result_uri("file:///x", **_TRY)
    other = result_uri("file:///x", **{**_TRY, "try_number": 2})

    assert cancel_uri(one) != one
    assert cancel_uri(one) != cancel_uri(other)


def test_cancel_uri_only_replaces_a_final_json_suffix():
    assert cancel_uri("file:///x/a.json.d/r") == "file:///x/a.json.d/r.cancel"
    assert cancel_uri("/x/r.json") == "/x/r.cancel"


def test_result_uri_without_a_purpose_is_the_try_result():
    assert result_uri("file:///x", **_TRY, purpose="") == result_uri("file:///x", **_TRY)


def test_result_uri_with_a_purpose_adds_it_as_a_part():
    uri = result_uri("file:///srv/exchange", **_TRY, purpose="cleanup")

    assert re.fullmatch(
        r"file:///srv/exchange/sales__scheduled__2026-01-01__load__-1__1__cleanup__[0-9a-f]{12}\.json", uri
    )
    assert uri != result_uri("file:///srv/exchange", **_TRY)
    assert uri != result_uri("file:///srv/exchange", **_TRY, purpose="other")


def test_result_uri_purpose_is_reduced_to_safe_characters():
    uri = result_uri("file:///x", **_TRY, purpose="clean up/now")

    assert "__clean_up_now__" in uri
    assert uri != result_uri("file:///x", **_TRY, purpose="clean_up_now")


_TASK = {key: value for key, value in _TRY.items() if key != "try_number"}


def test_claim_uri_is_one_flat_claim_file_under_the_root():
    uri = claim_uri("file:///srv/exchange/", **_TASK)

    assert re.fullmatch(r"file:///srv/exchange/sales__scheduled__2026-01-01__load__-1__[0-9a-f]{12}\.claim\.json", uri)


def test_claim_uri_replaces_unsafe_characters_and_stays_unique():
    uri = claim_uri("s3://bucket/exchange", dag_id="team/dag", run_id="r", task_id="group.task id", map_index=3)

    assert re.fullmatch(r"s3://bucket/exchange/team_dag__r__group\.task_id__3__[0-9a-f]{12}\.claim\.json", uri)
    assert uri != claim_uri("s3://bucket/exchange", dag_id="team_dag", run_id="r", task_id="group.task_id", map_index=3)


@pytest.mark.parametrize(
    "change", [{"dag_id": "other"}, {"run_id": "manual__x"}, {"task_id": "other"}, {"map_index": 0}, {"map_index": 1}]
)
def test_claim_uri_differs_between_tasks(change):
    assert claim_uri("file:///x", **_TASK) != claim_uri("file:///x", **{**_TASK, **change})


def test_claim_uri_is_not_a_result_or_cancel_file():
    claim = claim_uri("file:///x", **_TASK)
    results = {result_uri("file:///x", **_TRY, purpose=purpose) for purpose in ("", "cleanup")}

    assert claim not in results
    assert claim not in {cancel_uri(uri) for uri in results}
    assert not any(uri.endswith(".claim.json") for uri in results)
