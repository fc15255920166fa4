"""The Airflow side of cached tables: the XCom backend, the files under the cache root, and what a task records.

The XComs live in memory here (``InMemoryXCom``: Airflow's set/get_all/delete semantics, purge included); the
files are real, in a temporary cache root. The real XCom channel is exercised by the integration tests.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pendulum
import pytest
from airflow.sdk import BaseXCom

from spark_tables.core.cache.descriptor import CacheDescriptor, CachePartition, descriptor_of_copy
from spark_tables.core.cache.layout import (
    LAST_USED,
    MEMORY_RECORD,
    RUN_MARKER,
    memory_location,
    memory_record_folder,
    run_folder,
)
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.errors import SpecError
from spark_tables.tasks.cache import memory as cache_memory
from spark_tables.tasks.cache import registry as cache_registry
from spark_tables.tasks.cache import storage as cache_storage
from spark_tables.tasks.cache import uses as cache_uses
from spark_tables.utils import settings
from spark_tables.xcom.cache_registry import CacheRegistryXComBackend, deleting

pytestmark = pytest.mark.usefixtures("spark_tables_home")

B = CachedTable("b", query="SELECT k, max(h) AS h FROM a GROUP BY k")
RUN = "manual__2026-11-22T10:00:00+00:00"
TASKS = ["max_b", "min_b", "count_b"]


class InMemoryXCom(CacheRegistryXComBackend):
    """XCom rows in a dict, with BaseXCom's semantics: values pass through the backend's (de)serialization, and
    ``delete`` purges before it removes the row."""

    rows: ClassVar[dict[tuple[str, str, str, int, str], Any]] = {}

    @classmethod
    def set(cls, key: str, value: Any, *, dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> None:
        stored = cls.serialize_value(value, key=key, task_id=task_id, dag_id=dag_id, run_id=run_id)
        cls.rows[(dag_id, run_id, task_id, map_index, key)] = json.loads(json.dumps(stored))

    @classmethod
    def get_all(cls, *, key: str, dag_id: str, task_id: str, run_id: str) -> list[Any] | None:
        found = [
            cls.deserialize_value(SimpleNamespace(value=value))
            for (d, r, t, _, k), value in sorted(cls.rows.items())
            if (d, r, t, k) == (dag_id, run_id, task_id, key)
        ]
        return found or None

    @classmethod
    def delete(cls, key: str, task_id: str, dag_id: str, run_id: str, map_index: int | None = None) -> None:
        value = cls.rows.pop((dag_id, run_id, task_id, -1 if map_index is None else map_index, key), None)
        with deleting(dag_id, run_id, task_id, map_index):
            cls.purge(SimpleNamespace(value=value))


@pytest.fixture(autouse=True)
def xcom(monkeypatch) -> type[InMemoryXCom]:
    monkeypatch.setattr(InMemoryXCom, "rows", {})
    monkeypatch.setattr(cache_registry, "XCom", InMemoryXCom)
    return InMemoryXCom


#: Task instance states by run and task, as ``ti.get_task_states`` gives them; empty: no task is known.
STATES: dict[str, dict[str, str]] = {}


def ti(task_id: str = "max_b", try_number: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        dag_id="flip36",
        run_id=RUN,
        task_id=task_id,
        map_index=-1,
        try_number=try_number,
        stats_tags={},
        get_task_states=lambda dag_id, task_ids, run_ids, map_index=None: {
            run: {task: state for task, state in STATES.get(run, {}).items() if task in task_ids} for run in run_ids
        },
    )


def a_copy(location: str, files: dict[str, bytes]) -> list[CachePartition]:
    """Part files under a local ``file://`` location, described as a job would describe them."""
    folder = Path(location.removeprefix("file://"))
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return [CachePartition(name, 1, len(data), 0) for name, data in files.items()]


def written_report(
    location: str, files: dict[str, bytes] | None = None, damaged: list | None = None, unchecked: list | None = None
) -> dict:
    partitions = a_copy(location, files or {"part-0.parquet": b"x" * 10})
    return {
        "status": "fallback" if damaged or unchecked else "miss",
        "location": location,
        "damaged": damaged or [],
        "unchecked": unchecked or [],
        "bytes_read": 0,
        "bytes_written": sum(p.bytes for p in partitions),
        "seconds": 1.0,
        "written": {"schema": "{}", "partitions": [vars(p) for p in partitions]},
    }


def registered_copy(task_id: str, table: CachedTable = B) -> CacheDescriptor:
    """A copy of ``table`` written by task ``task_id`` and registered on it, as after that task's miss."""
    [use] = cache_uses.cache_uses(ti(task_id), [table], TASKS)
    descriptor = descriptor_of_copy(
        table.name,
        table.fingerprint,
        written_report(use.location),
        TableOwner.of_task_instance(ti(task_id)),
        pendulum.now("UTC").isoformat(),
    )
    cache_registry.register(ti(task_id), descriptor)
    return descriptor


def local(location: str) -> Path:
    return Path(location.removeprefix("file://"))


class TestBackend:
    @pytest.mark.parametrize(
        "value",
        [
            {"rows": [[1, "a"]], "nested": {"x": [1.5, None, True]}},
            [1, 2, 3],
            "text",
            42,
            None,
            datetime.datetime(2026, 11, 22, 10, 0, tzinfo=datetime.UTC),
            (1, "tuple"),
            {"type": "not a descriptor"},
        ],
    )
    def test_every_other_value_round_trips_as_with_airflow_s_default(self, value):
        stored = CacheRegistryXComBackend.serialize_value(value, key="k", task_id="t", dag_id="d", run_id="r")

        assert stored == BaseXCom.serialize_value(value, key="k", task_id="t", dag_id="d", run_id="r")
        assert CacheRegistryXComBackend.deserialize_value(SimpleNamespace(value=stored)) == value

    def test_a_descriptor_is_stored_as_a_tagged_json_object_and_read_back_as_a_descriptor(self):
        descriptor = registered_copy("max_b")

        stored = CacheRegistryXComBackend.serialize_value(descriptor)

        assert json.loads(json.dumps(stored)) == stored and stored["type"].startswith("spark_tables.cache")
        assert CacheRegistryXComBackend.deserialize_value(SimpleNamespace(value=stored)) == descriptor

    def test_purging_a_descriptor_deletes_its_copy_and_nothing_else(self):
        descriptor, other = registered_copy("max_b"), registered_copy("min_b")

        with deleting("flip36", RUN, "max_b", -1):
            CacheRegistryXComBackend.purge(SimpleNamespace(value=descriptor.to_dict()))

        assert not local(descriptor.location).exists()
        assert local(other.location).exists()

    def test_a_purge_without_the_xcom_s_identity_deletes_nothing(self):
        descriptor = registered_copy("max_b")
        CacheRegistryXComBackend.purge(SimpleNamespace(value=descriptor.to_dict()))
        assert local(descriptor.location).exists()


def forged(descriptor: CacheDescriptor, **changes: Any) -> dict[str, Any]:
    """A registry XCom value as someone with XCom edit rights could write it through Airflow's API."""
    return {**descriptor.to_dict(), **changes}


class TestForgedRegistryEntries:
    """A registry XCom is Airflow data a user may edit: what it names is checked before anything is read or deleted."""

    @pytest.fixture
    def victim(self, tmp_path: Path) -> Path:
        folder = tmp_path / "prod-lake"
        folder.mkdir()
        (folder / "orders.parquet").write_text("not the cache's")
        return folder

    def _forge(self, xcom: type[InMemoryXCom], task_id: str, value: dict[str, Any]) -> None:
        xcom.rows[("flip36", RUN, task_id, -1, "spark_tables.cache.b")] = value

    @pytest.mark.parametrize(
        "where",
        ["outside", "parent", "other run", "other task's folder", "other cache"],
    )
    def test_a_location_outside_its_task_s_copies_is_neither_read_nor_deleted(self, xcom, victim, where):
        mine = registered_copy("max_b")
        run = run_folder(settings.cache_uri(), "flip36", RUN)
        other_copy = registered_copy("min_b")
        location = {
            "outside": f"file://{victim}",
            "parent": f"{mine.location}/../../..",
            "other run": mine.location.replace(run, run_folder(settings.cache_uri(), "flip36", "another_run")),
            "other task's folder": other_copy.location,
            "other cache": mine.location.replace(f"/b-{B.fingerprint}/", "/c-0123456789abcdef/"),
        }[where]
        self._forge(xcom, "max_b", forged(mine, location=location))

        assert [d.location for d in cache_registry.registered(ti(), "b", TASKS)] == [other_copy.location]
        xcom.delete(key="spark_tables.cache.b", task_id="max_b", dag_id="flip36", run_id=RUN)

        assert (victim / "orders.parquet").read_text() == "not the cache's"
        assert local(mine.location).exists() and local(other_copy.location).exists()

    def test_another_task_s_owner_does_not_reach_its_xcom_or_copy(self, xcom):
        """The owner names whose XCom an invalidation deletes: a forged one would delete another DAG's entry."""
        victim = registered_copy("min_b")
        other_dag = TableOwner("billing", RUN, "min_b")
        self._forge(xcom, "max_b", forged(victim, owner=vars(other_dag)))

        assert [d.location for d in cache_registry.registered(ti(), "b", TASKS)] == [victim.location]
        xcom.delete(key="spark_tables.cache.b", task_id="max_b", dag_id="flip36", run_id=RUN)
        assert local(victim.location).exists()

    @pytest.mark.parametrize(
        "changes",
        [
            {"name": "../b"},
            {"fingerprint": "../../x"},
            {"partitions": [{"file": "../../etc/passwd", "rows": 1, "bytes": 1, "crc32": 0}]},
            {"partitions": [{"file": "part-0.parquet", "rows": -1, "bytes": 1, "crc32": 0}]},
            {"server": "a b"},
            {"storage": "memory"},
            {"extra": 1},
        ],
    )
    def test_a_malformed_descriptor_is_refused_in_one_line_and_left_alone(self, xcom, changes):
        mine = registered_copy("max_b")
        self._forge(xcom, "max_b", forged(mine, **changes))

        with pytest.raises(SpecError) as caught:
            CacheDescriptor.from_dict(forged(mine, **changes))
        assert "\n" not in str(caught.value)
        assert cache_registry.registered(ti(), "b", TASKS) == []
        xcom.delete(key="spark_tables.cache.b", task_id="max_b", dag_id="flip36", run_id=RUN)
        assert local(mine.location).exists()

    def test_a_memory_copy_must_be_a_view_of_its_cache(self, xcom):
        mine = registered_copy("max_b")
        value = forged(
            mine,
            storage="memory",
            format="memory",
            partitions=[],
            server="spark_connect_default",
            location="memory:local-1/global_temp.customers",
        )
        self._forge(xcom, "max_b", value)
        assert cache_registry.registered(ti(), "b", TASKS) == []

    @pytest.mark.parametrize("value", [None, {"rows": []}, "file:///tmp"])
    def test_purging_any_other_value_deletes_nothing(self, value, tmp_path):
        (tmp_path / "keep").write_text("x")
        CacheRegistryXComBackend.purge(SimpleNamespace(value=value))
        assert (tmp_path / "keep").exists()


class TestRequireBackend:
    def test_the_backend_named_in_the_message_is_the_backend_class(self):
        backend = CacheRegistryXComBackend
        assert f"{backend.__module__}.{backend.__qualname__}" == cache_registry.BACKEND_PATH

    def test_without_the_backend_the_task_is_told_what_to_set(self, monkeypatch):
        monkeypatch.setattr(cache_registry, "XCom", BaseXCom)

        with pytest.raises(SpecError) as caught:
            cache_uses.cache_uses(ti(), [B], TASKS)

        message = str(caught.value)
        assert "[core] xcom_backend" in message and cache_registry.BACKEND_PATH in message and "\n" not in message

    def test_without_cached_tables_no_backend_is_needed(self, monkeypatch):
        monkeypatch.setattr(cache_registry, "XCom", BaseXCom)
        assert cache_uses.cache_uses(ti(), [], TASKS) == ()


class TestCacheUses:
    def test_a_first_use_finds_nothing_and_gets_a_new_folder_in_its_run(self):
        [use] = cache_uses.cache_uses(ti(), [B], TASKS)

        run = run_folder(settings.cache_uri(), "flip36", RUN)
        assert use.registered == () and use.location.startswith(f"{run}/b-{B.fingerprint}/max_b__")
        assert json.loads((local(run) / RUN_MARKER).read_text()) == {"dag_id": "flip36", "run_id": RUN}
        assert not local(use.location).exists(), "nothing is written before the job computes the table"

    def test_later_uses_find_the_registered_copies_of_the_same_definition_oldest_first(self, monkeypatch):
        first = registered_copy("max_b")
        monkeypatch.setattr(pendulum, "now", lambda tz=None: pendulum.datetime(2030, 1, 1, tz="UTC"))
        second = registered_copy("min_b")
        registered_copy("count_b", CachedTable("b", query="SELECT 1 AS other_definition"))

        [use] = cache_uses.cache_uses(ti("count_b"), [B], TASKS)

        assert use.registered == (first, second)

    def test_copies_of_other_tasks_are_not_looked_for(self):
        registered_copy("max_b")
        assert cache_uses.cache_uses(ti("count_b"), [B], ["min_b", "count_b"])[0].registered == ()


class TestSettle:
    def test_a_written_copy_is_registered_on_this_task_and_summarised(self, xcom):
        [use] = cache_uses.cache_uses(ti(), [B], TASKS)

        summary = cache_uses.settle(ti(), (use,), {"b": written_report(use.location)}, TASKS)

        [descriptor] = cache_registry.registered(ti(), "b", TASKS)
        assert descriptor.location == use.location and descriptor.owner == TableOwner.of_task_instance(ti())
        assert ("flip36", RUN, "max_b", -1, B.registry_key) in xcom.rows
        assert summary["b"] == {
            "definition": B.query,
            "fingerprint": B.fingerprint,
            "status": "miss",
            "hits": 0,
            "misses": 1,
            "fallbacks": 0,
            "bytes_read": 0,
            "bytes_written": 10,
            "seconds": 1.0,
            "location": use.location,
            "damaged": [],
            "unchecked": [],
            "copy_written": {"rows": 1, "bytes": 10, "partitions": 1},
            "copies_removed": [],
        }

    def test_a_hit_registers_nothing_and_marks_the_copy_used(self, xcom):
        copy = registered_copy("max_b")
        [use] = cache_uses.cache_uses(ti("min_b"), [B], TASKS)
        report = {"status": "hit", "location": copy.location, "damaged": [], "unchecked": []}
        report |= {"bytes_read": 10, "bytes_written": 0}

        summary = cache_uses.settle(ti("min_b"), (use,), {"b": {**report, "seconds": 0.2}}, TASKS)

        assert (summary["b"]["hits"], summary["b"]["misses"]) == (1, 0)
        assert cache_registry.registered(ti(), "b", TASKS) == [copy]
        assert (local(copy.location) / LAST_USED).exists()

    def test_a_damaged_copy_is_unregistered_with_its_files_and_the_new_one_registered(self):
        damaged = registered_copy("max_b")
        [use] = cache_uses.cache_uses(ti("min_b"), [B], TASKS)
        problem = [{"location": damaged.location, "problem": "partition part-0.parquet is missing"}]

        summary = cache_uses.settle(ti("min_b"), (use,), {"b": written_report(use.location, damaged=problem)}, TASKS)

        assert [d.location for d in cache_registry.registered(ti(), "b", TASKS)] == [use.location]
        assert not local(damaged.location).exists()
        assert (summary["b"]["fallbacks"], summary["b"]["damaged"]) == (1, problem)
        assert summary["b"]["copies_removed"] == [
            {"location": damaged.location, "reason": "damaged: partition part-0.parquet is missing"}
        ], "the task's XCom says which copy it removed, and why"

    def test_a_copy_that_could_not_be_checked_stays_registered_with_its_files(self):
        kept = registered_copy("max_b")
        [use] = cache_uses.cache_uses(ti("min_b"), [B], TASKS)
        unchecked = [{"location": kept.location, "problem": "its files could not be read: TimeoutError: storage"}]

        report = written_report(use.location, unchecked=unchecked)
        summary = cache_uses.settle(ti("min_b"), (use,), {"b": report}, TASKS)

        # Nothing proves the copy damaged: it stays registered with its files, and, being the run's first copy,
        # it is the one the run keeps (the task's own copy is withdrawn, as of two tasks that missed at once).
        assert [d.location for d in cache_registry.registered(ti(), "b", TASKS)] == [kept.location]
        assert local(kept.location).exists() and not local(use.location).exists()
        assert (summary["b"]["fallbacks"], summary["b"]["damaged"], summary["b"]["unchecked"]) == (1, [], unchecked)

    def test_of_two_tasks_that_missed_at_once_the_first_registered_keeps_its_copy(self):
        [slow] = cache_uses.cache_uses(ti("min_b"), [B], TASKS)  # looked up before the other registered
        first = registered_copy("max_b")

        summary = cache_uses.settle(ti("min_b"), (slow,), {"b": written_report(slow.location)}, TASKS)

        assert cache_registry.registered(ti(), "b", TASKS) == [first]
        assert not local(slow.location).exists(), "the second copy is withdrawn with its files"
        assert summary["b"]["copies_removed"] == [
            {"location": slow.location, "reason": "max_b registered its copy first"}
        ]
        assert summary["b"]["copy_written"] == {"rows": 1, "bytes": 10, "partitions": 1}, "the copy as it was"

    def test_a_table_the_job_never_got_to_is_left_out(self):
        uses = cache_uses.cache_uses(ti(), [B, CachedTable("c", query="SELECT 1 AS c")], TASKS)

        summary = cache_uses.settle(ti(), uses, {"b": written_report(uses[0].location)}, TASKS)

        assert list(summary) == ["b"]


class TestStorage:
    def test_runs_are_found_by_their_markers(self):
        root = settings.cache_uri()
        for dag, run in (("flip36", RUN), ("flip36", "other"), ("etl", RUN)):
            cache_storage.mark_run(run_folder(root, dag, run), dag, run)

        assert sorted(r[:2] for r in cache_storage.runs(root, "flip36")) == [("flip36", RUN), ("flip36", "other")]
        assert len(cache_storage.runs(root)) == 3
        assert cache_storage.runs(root, "never_ran") == []

    def test_a_malformed_run_marker_leaves_its_folder_out_of_the_runs_and_says_so(self, caplog):
        root = settings.cache_uri()
        cache_storage.mark_run(run_folder(root, "flip36", RUN), "flip36", RUN)
        broken = run_folder(root, "flip36", "broken")
        local(broken).mkdir(parents=True)
        (local(broken) / RUN_MARKER).write_text('{"dag_id": "flip36"}')

        with caplog.at_level(logging.WARNING, logger="spark_tables.tasks.cache.storage"):
            found = cache_storage.runs(root, "flip36")

        assert [r[:2] for r in found] == [("flip36", RUN)]
        [record] = [r for r in caplog.records if r.name == "spark_tables.tasks.cache.storage"]
        assert broken.removeprefix("file://") in record.getMessage() and "left out of the sweep" in record.getMessage()

    def test_copies_are_sized_and_dated_by_their_last_use(self):
        used, unused = registered_copy("max_b"), registered_copy("min_b")
        cache_storage.mark_used(used.location)

        found = {copy.location: copy for copy in cache_storage.copies(settings.cache_uri())}

        assert set(found) == {used.location, unused.location}
        assert found[unused.location].bytes == 10 and found[used.location].bytes > 10  # the mark takes bytes too
        assert found[used.location].last_used > found[unused.location].last_used

    def test_eviction_removes_the_least_recently_used_until_under_the_quota_never_a_kept_one(self, monkeypatch):
        oldest, middle, newest = (registered_copy(task) for task in TASKS)
        for minute, copy in enumerate((oldest, middle, newest)):
            monkeypatch.setattr(
                pendulum, "now", lambda tz=None, m=minute: pendulum.datetime(2030, 1, 1, 0, m, tz="UTC")
            )
            cache_storage.mark_used(copy.location)

        sizes = {copy.location: copy.bytes for copy in cache_storage.copies(settings.cache_uri())}
        quota = sum(sizes.values()) - sizes[middle.location]  # one copy must go: the oldest is kept

        evicted = cache_storage.evict(cache_storage.copies(settings.cache_uri()), quota=quota, keep={oldest.location})

        assert [copy.location for copy in evicted] == [middle.location]
        assert local(oldest.location).exists() and local(newest.location).exists()

    def test_nothing_is_evicted_under_the_quota(self):
        registered_copy("max_b")
        assert cache_storage.evict(cache_storage.copies(settings.cache_uri()), quota=10_000, keep=set()) == []

    def test_evict_over_quota_follows_the_setting_and_keeps_what_the_task_used(self, monkeypatch):
        old, mine = registered_copy("max_b"), registered_copy("min_b")
        for copy in (old, mine):
            cache_storage.mark_used(copy.location)
        monkeypatch.setenv("AIRFLOW__SPARK_TABLES__CACHE_QUOTA", "40 B")  # one 10-byte copy and its mark fit

        assert cache_uses.evict_over_quota(ti(), {"b": {"location": mine.location}}) == [old.location]
        monkeypatch.delenv("AIRFLOW__SPARK_TABLES__CACHE_QUOTA")
        assert cache_uses.evict_over_quota(ti(), {"b": {"location": mine.location}}) == []

    def test_a_copy_still_being_written_is_never_evicted(self):
        """Its writer registers it and marks its first use only once its files are all there: until then it has no
        last use, and sorted first it would be the first evicted."""
        written, writing = registered_copy("max_b"), registered_copy("min_b")
        cache_storage.mark_used(written.location)
        (local(writing.location) / LAST_USED).unlink(missing_ok=True)

        evicted = cache_storage.evict(cache_storage.copies(settings.cache_uri()), quota=0, keep=set())

        assert [copy.location for copy in evicted] == [written.location]
        assert local(writing.location).exists()

    def test_a_copy_another_running_task_holds_a_lease_on_is_not_evicted_until_that_task_ends(self, monkeypatch):
        """Least recently used is not unused: a task that found the copy may be reading it right now."""
        monkeypatch.setenv("AIRFLOW__SPARK_TABLES__CACHE_QUOTA", "1 B")
        old = registered_copy("max_b")
        cache_storage.mark_used(old.location)
        reader = TableOwner("flip36", RUN, "count_b")
        cache_storage.lease(old.location, reader)
        STATES[RUN] = {"count_b": "running"}
        try:
            assert cache_uses.evict_over_quota(ti("min_b"), {"other": {"location": "elsewhere"}}) == []
            assert local(old.location).exists()
            STATES[RUN] = {"count_b": "success"}
            assert cache_uses.evict_over_quota(ti("min_b"), {"other": {"location": "elsewhere"}}) == [old.location]
        finally:
            STATES.clear()

    def test_a_task_leases_the_copies_it_may_read_and_releases_them_when_it_settles(self):
        old = registered_copy("max_b")
        caches = cache_uses.TaskCaches.prepare(ti("count_b"), [B], TASKS)
        [copy] = [c for c in cache_storage.copies(settings.cache_uri()) if c.location == old.location]
        assert copy.readers == (TableOwner.of_task_instance(ti("count_b")),)

        caches.settle(None)

        [copy] = [c for c in cache_storage.copies(settings.cache_uri()) if c.location == old.location]
        assert copy.readers == ()

    def test_a_mark_that_is_not_what_it_should_be_is_never_trusted(self, caplog):
        copy = registered_copy("max_b")
        (local(copy.location) / LAST_USED).write_text("2030-01-0")  # as a reader would see half a mark
        found = {c.location: c for c in cache_storage.copies(settings.cache_uri())}
        assert found[copy.location].last_used == "", "taken for a copy being written: never evicted"
        cache_storage.mark_used(copy.location)
        assert [p.name for p in local(copy.location).iterdir() if p.name.startswith(".")] == [], "no temporary left"
        assert cache_storage.copies(settings.cache_uri())[0].last_used.startswith("20")

    def test_removing_twice_is_removing_once(self):
        copy = registered_copy("max_b")
        cache_storage.remove(copy.location)
        cache_storage.remove(copy.location)
        assert not local(copy.location).exists()


def memory_copy(
    task_id: str, server: str = "spark_connect", table: CachedTable = B, run_id: str = RUN
) -> CacheDescriptor:
    """A copy of ``table`` kept in the memory of ``server``'s application by task ``task_id``, registered on it."""
    task = ti(task_id)
    task.run_id = run_id
    [use] = cache_uses.cache_uses(task, [table], TASKS, server)
    report = {
        "status": "miss",
        "location": memory_location("app-1", f"global_temp.{use.location}"),
        "damaged": [],
        "unchecked": [],
        "bytes_read": 0,
        "bytes_written": 4096,
        "seconds": 1.0,
        "written": {"storage": "memory", "schema": "{}", "rows": 50, "bytes": 4096},
    }
    [(name, summary)] = cache_uses.settle(task, (use,), {"b": report}, TASKS, server).items()
    assert summary["copy_written"] == {"rows": 50, "bytes": 4096, "partitions": 0}
    return cache_registry.registered(task, name, [task_id])[0]


def record_folder(copy: CacheDescriptor) -> Path:
    run = run_folder(settings.cache_uri(), copy.owner.dag_id, copy.owner.run_id)
    return local(memory_record_folder(run, copy.name, copy.fingerprint, copy.location))


class TestKeptInMemory:
    @pytest.fixture(autouse=True)
    def released(self, monkeypatch) -> list[tuple[str, str, str]]:
        """The copies kept in memory whose release on their server was asked for (cache, server, location): the
        server is not reached here."""
        released: list[tuple[str, str, str]] = []
        monkeypatch.setattr(cache_memory, "release", lambda *copy: released.append(copy))
        return released

    def test_in_session_mode_a_use_keeps_its_copy_in_the_servers_memory_under_a_view_of_its_own(self):
        [use] = cache_uses.cache_uses(ti(), [B], TASKS, "spark_connect")

        assert use.storage == "memory" and use.location.startswith(f"spark_tables_b_{B.fingerprint}_")

    def test_a_table_kept_on_files_stays_on_files_in_session_mode(self):
        [use] = cache_uses.cache_uses(ti(), [CachedTable("b", query=B.query, storage="files")], TASKS, "spark_connect")

        assert use.storage == "files" and use.location.startswith(run_folder(settings.cache_uri(), "flip36", RUN))

    def test_a_copy_in_memory_is_registered_naming_its_server_and_only_its_record_is_written_to_files(self):
        copy = memory_copy("max_b")

        assert (copy.in_memory, copy.server, copy.rows, copy.bytes) == (True, "spark_connect", 50, 4096)
        record = record_folder(copy)
        assert sorted(path.name for path in record.iterdir()) == [LAST_USED, MEMORY_RECORD], "no copy's files"
        [found] = cache_storage.copies(settings.cache_uri())
        assert (found.location, found.memory, found.server, found.bytes) == (
            f"file://{record}",
            copy.location,
            "spark_connect",
            4096,
        ), "the quota counts its bytes in memory"

    def test_only_tasks_on_the_same_server_read_a_copy_in_its_memory(self):
        copy = memory_copy("max_b")

        assert cache_uses.cache_uses(ti("min_b"), [B], TASKS, "spark_connect")[0].registered == (copy,)
        assert cache_uses.cache_uses(ti("min_b"), [B], TASKS, "other_server")[0].registered == ()
        assert cache_uses.cache_uses(ti("min_b"), [B], TASKS)[0].registered == (), "per-job: its own application"

    def test_a_per_job_task_claims_and_computes_what_only_a_servers_memory_holds(self):
        memory_copy("max_b")

        [(_, _, claim)] = cache_uses.claim_missing(ti("min_b"), (B,), TASKS)

        assert claim.holder == TableOwner.of_task_instance(ti("min_b"))

    def test_a_copy_on_files_written_beside_one_in_memory_is_kept_for_the_tasks_that_read_files(self):
        memory_copy("max_b")
        [use] = cache_uses.cache_uses(ti("min_b"), [B], TASKS)

        summary = cache_uses.settle(ti("min_b"), (use,), {"b": written_report(use.location)}, TASKS)

        assert summary["b"]["copies_removed"] == [] and local(use.location).exists()

    def test_memory_asked_for_in_per_job_mode_fails_before_anything_is_claimed(self):
        in_memory = CachedTable("b", query=B.query, storage="memory")

        with pytest.raises(SpecError, match="storage 'memory' keeps it in a Spark Connect server's memory"):
            cache_uses.TaskCaches.prepare(ti(), (in_memory,), TASKS)

        assert not local(run_folder(settings.cache_uri(), "flip36", RUN)).exists(), "no claim, no run folder"

    def test_purging_a_copy_in_memory_releases_it_on_its_server_and_deletes_its_record_alone(self, released):
        copy, on_files = memory_copy("max_b"), registered_copy("min_b")

        with deleting("flip36", RUN, "max_b", -1):
            CacheRegistryXComBackend.purge(SimpleNamespace(value=copy.to_dict()))

        assert released == [("b", "spark_connect", copy.location)] and local(on_files.location).exists()
        assert not record_folder(copy).exists()

    def test_past_the_memory_quota_the_least_recently_used_copy_of_that_server_is_released(self, released, monkeypatch):
        copies = []  # one a run: a run keeps one copy of b
        for minute, server in enumerate(("spark_connect", "other", "spark_connect")):
            monkeypatch.setattr(
                pendulum, "now", lambda tz=None, m=minute: pendulum.datetime(2030, 1, 1, 0, m, tz="UTC")
            )
            copies.append(memory_copy("max_b", server, run_id=f"run_{minute}"))
        oldest, elsewhere, newest = copies
        monkeypatch.setenv("AIRFLOW__SPARK_TABLES__CACHE_MEMORY_QUOTA", "5000 B")  # one 4096-byte copy a server

        assert cache_uses.evict_over_quota(ti(), {"b": {"location": newest.location}}) == [oldest.location]
        assert released == [("b", "spark_connect", oldest.location)]
        assert not record_folder(oldest).exists() and record_folder(newest).exists()
        assert record_folder(elsewhere).exists(), "another server's memory has a quota of its own"

    def test_the_copy_the_task_used_is_kept_past_the_memory_quota(self, released, monkeypatch):
        copy = memory_copy("max_b")
        monkeypatch.setenv("AIRFLOW__SPARK_TABLES__CACHE_MEMORY_QUOTA", "1 B")

        assert cache_uses.evict_over_quota(ti(), {"b": {"location": copy.location}}) == []
        assert released == [] and record_folder(copy).exists()

    def test_the_sweep_of_an_ended_run_releases_what_its_tasks_kept_in_memory(self, released):
        from spark_tables.operators.cache import sweep

        ended, active = memory_copy("max_b", run_id="ended"), memory_copy("max_b", run_id="active")
        sweeper = SimpleNamespace(
            dag_id="maintenance", run_id="now", get_dr_count=lambda dag_id, run_ids, states: int(run_ids == ["active"])
        )

        assert sweep(sweeper) == ["ended"]
        assert released == [("b", "spark_connect", ended.location)]
        assert not record_folder(ended).exists() and record_folder(active).exists()

    def test_a_record_naming_another_view_is_never_released(self, released, monkeypatch, caplog):
        """The cache root is shared storage: a record whose location names any other view on the server (another
        DAG's cached table, a user's) is left out of eviction and the sweep."""
        copy = memory_copy("max_b")
        record = record_folder(copy) / MEMORY_RECORD
        forged = {"location": "memory:app-1/global_temp.someone_elses_view", "server": "spark_connect", "bytes": 4096}
        record.write_text(json.dumps(forged))
        monkeypatch.setenv("AIRFLOW__SPARK_TABLES__CACHE_MEMORY_QUOTA", "1 B")

        with caplog.at_level(logging.WARNING):
            found = cache_storage.copies(settings.cache_uri())
            assert cache_uses.evict_over_quota(ti("min_b"), {"other": {"location": "elsewhere"}}) == []
        run = run_folder(settings.cache_uri(), "flip36", RUN)
        cache_memory.release_recorded(found, run)

        assert released == []
        assert "not its own copy kept in memory: left out" in caplog.text

    def test_a_copy_in_memory_is_never_evicted_from_files(self, monkeypatch):
        monkeypatch.setattr(settings, "cache_quota", lambda: 0)
        copy = memory_copy("max_b")

        assert cache_uses.evict_over_quota(ti(), {"b": {"location": copy.location}}) == []


class TestReleaseCopy:
    def test_a_server_that_cannot_be_reached_is_logged_and_the_release_goes_on(self, monkeypatch, caplog):
        with socket.socket() as closed:  # bound, never listening
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
            connection = json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port})
            monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT", connection)
            copy = dataclasses.replace(
                registered_copy("max_b"),
                location=memory_location("app-1", "global_temp.v"),
                storage="memory",
                format="memory",
                partitions=(),
                server="spark_connect",
            )
            with caplog.at_level(logging.WARNING):
                cache_memory.release_copy(copy)

        assert "could not release the copy kept in memory at memory:app-1/global_temp.v" in caplog.text
        assert f"sc://127.0.0.1:{port} of connection 'spark_connect' cannot be reached" in caplog.text
