"""Property tests of what a cache registry entry may name: only its own task's copies under the cache root."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_tables.core.cache.descriptor import CacheDescriptor, CachePartition, UntrustedDescriptor
from spark_tables.core.cache.layout import copy_folder, memory_location, memory_view, run_folder
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError

ROOT = "s3://team-cache/airflow"
TABLE = CachedTable("customers", query="SELECT 1 AS id")
OWNER = TableOwner("sales", "scheduled__2026-11-28", "load", 3, 2)
RUN = run_folder(ROOT, OWNER.dag_id, OWNER.run_id)


def descriptor(location: str, *, in_memory: bool = False) -> CacheDescriptor:
    held = {"storage": "memory", "format": "memory", "server": "spark_connect"} if in_memory else {"format": "parquet"}
    return CacheDescriptor(
        name=TABLE.name,
        fingerprint=TABLE.fingerprint,
        location=location,
        schema="{}",
        partitions=() if in_memory else (CachePartition("part-0.parquet", 1, 1, 0),),
        owner=OWNER,
        written_at="2026-11-28T00:00:00+00:00",
        **held,
    )


def placed(location: str, *, in_memory: bool = False) -> bool:
    try:
        descriptor(location, in_memory=in_memory).check_place(ROOT, "sales", OWNER.run_id, "load", 3)
    except UntrustedDescriptor as err:
        assert "\n" not in str(err) and "refused, and left alone" in str(err)
        return False
    return True


def test_a_copy_folder_the_owner_writes_is_placed() -> None:
    assert placed(copy_folder(RUN, TABLE, OWNER))
    earlier_try = dataclasses.replace(OWNER, try_number=1)  # its job, taken over by the owner's try (durable)
    assert placed(copy_folder(RUN, TABLE, earlier_try))
    assert not placed(copy_folder(RUN, TABLE, dataclasses.replace(OWNER, try_number=3)))
    assert not placed(copy_folder(RUN, TABLE, dataclasses.replace(OWNER, map_index=4)))
    assert placed(memory_location("app-20261128-0001", f"global_temp.{memory_view(TABLE)}"), in_memory=True)


@given(st.text())
def test_after_the_owner_s_folder_prefix_only_a_nonce_is_placed(suffix: str) -> None:
    prefix = copy_folder(RUN, TABLE, OWNER)[:-8]
    assert placed(prefix + suffix) == bool(re.fullmatch(r"[0-9a-f]{8}", suffix))


@given(st.text(min_size=1))
def test_no_other_location_is_placed(location: str) -> None:
    assert not placed(location)
    assert not placed(f"{RUN}/{location}")
    assert not placed(f"{ROOT}/{location}")


@given(st.text())
def test_a_view_in_memory_is_placed_only_as_its_cache_s(view: str) -> None:
    location = memory_location("app-1", f"global_temp.{view}")
    expected = rf"spark_tables_customers_{TABLE.fingerprint}_[0-9a-f]{{8}}"
    assert placed(location, in_memory=True) == bool(re.fullmatch(expected, view))


@pytest.mark.parametrize(
    ("dag", "run", "task", "map_index"),
    [
        ("billing", OWNER.run_id, "load", 3),
        ("sales", "other", "load", 3),
        ("sales", OWNER.run_id, "x", 3),
        ("sales", OWNER.run_id, "load", 0),
    ],
)
def test_another_task_s_xcom_does_not_place_the_owner_s_copy(dag: str, run: str, task: str, map_index: int) -> None:
    with pytest.raises(UntrustedDescriptor, match="names another task's copy"):
        descriptor(copy_folder(RUN, TABLE, OWNER)).check_place(ROOT, dag, run, task, map_index)


@given(st.text())
def test_a_partition_file_is_a_plain_name(name: str) -> None:
    try:
        CachePartition(name, 1, 1, 0)
    except SpecError:
        assert "/" in name or ".." in name or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._=-]*", name)
    else:
        assert "/" not in name and ".." not in name and name[:1].isalnum()
