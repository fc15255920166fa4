"""The cache-registry XCom backend beside another backend (``[spark_tables] other_xcom_backend``): the common-io
provider's object-storage backend keeps every value that is not the registry's, as it would alone; the registry's
descriptors stay in the database, where the registry reads them."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.common.io.xcom.backend import XComObjectStorageBackend
from airflow.sdk import BaseXCom

from spark_tables.core.cache.descriptor import CacheDescriptor, CachePartition
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.xcom.cache_registry import CacheRegistryXComBackend, other_backend

OBJECT_STORAGE = "airflow.providers.common.io.xcom.backend.XComObjectStorageBackend"
COORDINATES = {"key": "return_value", "task_id": "t", "dag_id": "d", "run_id": "r", "map_index": -1}


@pytest.fixture
def object_storage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The object-storage backend as the other backend, every value of 10 bytes or more written to ``tmp_path``."""
    store = tmp_path / "xcoms"
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__OTHER_XCOM_BACKEND", OBJECT_STORAGE)
    monkeypatch.setenv("AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_PATH", f"file://{store}")
    monkeypatch.setenv("AIRFLOW__COMMON_IO__XCOM_OBJECTSTORAGE_THRESHOLD", "10")
    return store


def _stored_files(store: Path) -> list[Path]:
    return sorted(path for path in store.rglob("*") if path.is_file()) if store.exists() else []


def test_without_the_setting_the_other_values_are_airflow_s_own() -> None:
    assert other_backend() is BaseXCom


def test_a_large_value_goes_to_object_storage_and_comes_back_and_its_purge_deletes_it(object_storage: Path) -> None:
    value = {"rows": list(range(50))}

    stored = CacheRegistryXComBackend.serialize_value(value, **COORDINATES)

    [written] = _stored_files(object_storage)  # where the object-storage backend puts it: by DAG, run and task
    assert written.parent == object_storage / "d" / "r" / "t"
    assert stored == f"file://{written}"  # the database keeps the path, not the value
    assert json.loads(written.read_text()) == value
    assert CacheRegistryXComBackend.deserialize_value(SimpleNamespace(value=stored)) == value
    CacheRegistryXComBackend.purge(SimpleNamespace(value=stored))
    assert not written.exists()


def test_a_value_reads_back_as_the_other_backend_alone_gives_it(object_storage: Path) -> None:
    """The object-storage backend keeps JSON: a tuple comes back a list, beside the registry as alone."""
    value = {"pair": (1, "two"), "n": 12345678901}
    alone = XComObjectStorageBackend.serialize_value(value, **COORDINATES)
    beside = CacheRegistryXComBackend.serialize_value(value, **COORDINATES)
    read = CacheRegistryXComBackend.deserialize_value(SimpleNamespace(value=beside))
    assert (
        read
        == XComObjectStorageBackend.deserialize_value(SimpleNamespace(value=alone))
        == {"pair": [1, "two"], "n": 12345678901}
    )


def test_a_small_value_stays_in_the_database_as_the_object_storage_backend_keeps_it(object_storage: Path) -> None:
    stored = CacheRegistryXComBackend.serialize_value(7, **COORDINATES)
    assert CacheRegistryXComBackend.deserialize_value(SimpleNamespace(value=stored)) == 7
    assert _stored_files(object_storage) == []


def test_a_descriptor_stays_in_the_database_whatever_its_size(object_storage: Path) -> None:
    descriptor = CacheDescriptor(
        name="b",
        fingerprint="f" * 16,
        location="file:///cache/d/r/b-ffff/t__-1__1",
        format="parquet",
        schema="a INT",
        partitions=tuple(CachePartition(f"part-{n}.parquet", 10, 100, n) for n in range(3)),
        owner=TableOwner(dag_id="d", run_id="r", task_id="t", map_index=-1, try_number=1),
        written_at="2026-11-29T05:00:00+00:00",
    )
    stored = CacheRegistryXComBackend.serialize_value(descriptor, **COORDINATES)
    assert stored == descriptor.to_dict()
    assert CacheRegistryXComBackend.deserialize_value(SimpleNamespace(value=stored)) == descriptor
    assert _stored_files(object_storage) == []


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("no_such_module.Backend", "'no_such_module.Backend' cannot be imported (No module named 'no_such_module')"),
        ("json.JSONDecoder", "'json.JSONDecoder' is not another XCom backend: name a subclass of airflow.sdk.BaseXCom"),
        (
            "spark_tables.xcom.cache_registry.CacheRegistryXComBackend",
            "'spark_tables.xcom.cache_registry.CacheRegistryXComBackend' is not another XCom backend",
        ),
    ],
)
def test_a_setting_that_names_no_other_backend_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, setting: str, message: str
) -> None:
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__OTHER_XCOM_BACKEND", setting)
    with pytest.raises(SpecError) as raised:
        CacheRegistryXComBackend.serialize_value([1, 2, 3], **COORDINATES)
    assert str(raised.value).startswith(f"[spark_tables] other_xcom_backend {message}")
    assert "\n" not in str(raised.value)
