"""Single-flight cached tables: the claim logic with a controlled clock, claims on real files, what consumers of one
cached table do before their jobs (XComs in memory), the trigger a waiting task defers to, and the operator's wait.

The real thing, with Celery workers and the triggerer, is in tests/integration/test_cache_single_flight.py.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.sdk.exceptions import TaskDeferred

from spark_tables.core.cache.claims import (
    LIVE_STATES,
    CacheClaim,
    ClaimStep,
    WaitOutcome,
    claim_file_name,
    claim_number,
    claim_step,
    claimed_cache_folder,
    wait_step,
)
from spark_tables.core.cache.layout import cache_folder_name, claims_folder, run_folder
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.tasks.cache import claims
from spark_tables.tasks.cache import registry as cache_registry
from spark_tables.tasks.cache.uses import CacheWaits, CopyBeingComputed, TaskCaches, claim_missing
from spark_tables.triggers.cached_table import CachedTableTrigger
from spark_tables.utils import settings
from tests.unit.test_cache_operators import FakeJobs, context
from tests.unit.test_cache_registry import InMemoryXCom, registered_copy, ti

pytestmark = pytest.mark.usefixtures("spark_tables_home")

B = CachedTable("b", query="SELECT k, max(h) AS h FROM a GROUP BY k")
TASKS = ["max_b", "min_b", "count_b"]
T0 = datetime.datetime(2026, 11, 26, 12, 0, tzinfo=datetime.UTC)


def owner(task_id: str, try_number: int = 1) -> TableOwner:
    return TableOwner.of_task_instance(ti(task_id, try_number))


def never_asked() -> str:
    raise AssertionError("the holder's state was asked for, though the claim alone tells")


@pytest.fixture(autouse=True)
def xcom(monkeypatch) -> type[InMemoryXCom]:
    monkeypatch.setattr(InMemoryXCom, "rows", {})
    monkeypatch.setattr(cache_registry, "XCom", InMemoryXCom)
    return InMemoryXCom


class TestClaimStep:
    def test_no_claim_yet_is_claimed(self):
        assert claim_step(None, owner("min_b"), never_asked) is ClaimStep.CLAIM

    def test_its_own_claim_is_held_and_an_earlier_try_of_its_task_taken_over(self):
        assert claim_step(CacheClaim(1, owner("max_b")), owner("max_b"), never_asked) is ClaimStep.HOLD
        assert claim_step(CacheClaim(1, owner("max_b")), owner("max_b", 2), never_asked) is ClaimStep.TAKE_OVER

    def test_a_released_claim_is_taken_over(self):
        released = CacheClaim(1, owner("max_b"), released=True)
        assert claim_step(released, owner("min_b"), never_asked) is ClaimStep.TAKE_OVER

    def test_a_claim_being_written_is_waited_for(self):
        assert claim_step(CacheClaim(1, None), owner("min_b"), never_asked) is ClaimStep.WAIT

    @pytest.mark.parametrize("state", sorted(LIVE_STATES))
    def test_another_task_that_may_still_run_is_waited_for(self, state):
        assert claim_step(CacheClaim(1, owner("max_b")), owner("min_b"), lambda: state) is ClaimStep.WAIT

    @pytest.mark.parametrize("state", ["success", "failed", "upstream_failed", "removed", None])
    def test_another_task_that_ended_without_releasing_is_taken_over(self, state):
        assert claim_step(CacheClaim(1, owner("max_b")), owner("min_b"), lambda: state) is ClaimStep.TAKE_OVER


class TestWaitStep:
    """The trigger's decision at each poll, on a clock the test sets."""

    CHECK_AT, DEADLINE = T0 + datetime.timedelta(minutes=1), T0 + datetime.timedelta(hours=1)

    def step(self, current: CacheClaim | None, now: datetime.datetime) -> WaitOutcome | None:
        return wait_step(1, current, now, self.CHECK_AT, self.DEADLINE)

    def test_waits_while_the_claim_is_current_and_not_released(self):
        assert self.step(CacheClaim(1, owner("max_b")), T0) is None
        assert self.step(CacheClaim(1, None), T0 + datetime.timedelta(seconds=59)) is None

    def test_a_release_ends_the_wait(self):
        assert self.step(CacheClaim(1, owner("max_b"), released=True), T0) is WaitOutcome.RELEASED

    def test_a_later_claim_or_none_ends_the_wait(self):
        assert self.step(CacheClaim(2, owner("min_b")), T0) is WaitOutcome.CLAIM_CHANGED
        assert self.step(None, T0) is WaitOutcome.CLAIM_CHANGED

    def test_the_check_interval_asks_for_the_holder_and_the_bound_ends_the_wait(self):
        claim = CacheClaim(1, owner("max_b"))
        assert self.step(claim, self.CHECK_AT) is WaitOutcome.CHECK_HOLDER
        assert self.step(claim, self.DEADLINE) is WaitOutcome.TIMED_OUT
        assert wait_step(1, claim, self.DEADLINE, self.DEADLINE, self.DEADLINE) is WaitOutcome.TIMED_OUT

    def test_a_release_counts_before_the_bound(self):
        assert self.step(CacheClaim(1, owner("max_b"), released=True), self.DEADLINE) is WaitOutcome.RELEASED


class TestClaimFiles:
    def run(self) -> str:
        return run_folder(settings.cache_uri(), "flip36", "manual__1")

    def test_names_round_trip_and_other_files_are_not_claims(self):
        folder = cache_folder_name(B)
        assert claim_number(folder, claim_file_name(folder, 12)) == 12
        assert claim_number(folder, f"{folder}.000012.released") is None
        assert claim_number("other-0123456789abcdef", claim_file_name(folder, 12)) is None

    def test_the_tables_claimed_in_a_run_are_named_by_their_claims_released_or_not(self):
        run, folder = self.run(), cache_folder_name(B)
        assert claimed_cache_folder(claim_file_name(folder, 3)) == folder
        assert claimed_cache_folder(f"{folder}.000003.released") is None
        assert claims.claimed(run) == set(), "no claims folder yet"
        claims.create(run, folder, CacheClaim(1, owner("max_b"), "2026-11-27T10:00:00+00:00"))
        claims.release(run, folder, 1)
        other = cache_folder_name(CachedTable("c", query="SELECT 1 AS c"))
        claims.create(run, other, CacheClaim(1, owner("min_b"), "2026-11-27T10:00:00+00:00"))
        assert claims.claimed(run) == {folder, other}

    def test_of_claims_created_at_once_exactly_one_is_created(self):
        run, folder, start = self.run(), cache_folder_name(B), threading.Barrier(8)
        created: list[str] = []

        def race(task_id: str) -> None:
            start.wait()
            if claims.create(run, folder, CacheClaim(1, owner(task_id))):
                created.append(task_id)

        threads = [threading.Thread(target=race, args=(f"t{n}",)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(created) == 1
        assert claims.current(run, folder) == CacheClaim(1, owner(created[0]))

    def test_a_claim_read_while_its_creator_writes_it_names_its_holder(self):
        run, folder = self.run(), cache_folder_name(B)
        path = Path(claims_folder(run).removeprefix("file://")) / claim_file_name(folder, 1)
        path.parent.mkdir(parents=True)
        path.touch()  # created exclusively, its content not written yet
        threading.Timer(0.2, path.write_text, (CacheClaim(1, owner("max_b")).to_json(),)).start()
        assert claims.current(run, folder) == CacheClaim(1, owner("max_b"))

    def test_the_current_claim_is_the_highest_and_knows_its_release(self):
        run, folder = self.run(), cache_folder_name(B)
        assert claims.current(run, folder) is None
        assert claims.create(run, folder, CacheClaim(1, owner("max_b"), "t1"))
        assert claims.create(run, folder, CacheClaim(2, owner("min_b"), "t2"))
        assert not claims.create(run, folder, CacheClaim(2, owner("count_b")))
        claims.release(run, folder, 1)
        assert claims.current(run, folder) == CacheClaim(2, owner("min_b"), "t2", released=False)
        claims.release(run, folder, 2)
        assert claims.current(run, folder).released
        assert claims.current(run, "c-0123456789abcdef") is None, "another table's claims are its own"


def with_states(task_id: str, states: dict[str, str | None], try_number: int = 1) -> SimpleNamespace:
    """A task instance whose ``get_task_states`` gives ``states`` by task id, as the Task SDK does."""
    task_instance = ti(task_id, try_number)
    task_instance.get_task_states = lambda dag_id, task_ids, run_ids, map_index: {
        run_ids[0]: {t: states.get(t) for t in task_ids}
    }
    return task_instance


class TestConsumers:
    """What consumers of one cached table do before their jobs, in the orders two workers may run them."""

    def test_the_first_computes_and_the_others_wait_for_it(self):
        [(run, folder, held)] = claim_missing(with_states("max_b", {}), (B,), TASKS)
        assert (held.number, held.holder) == (1, owner("max_b"))
        for task_id in ("min_b", "count_b"):
            with pytest.raises(CopyBeingComputed) as busy:
                claim_missing(with_states(task_id, {"max_b": "running"}), (B,), TASKS)
            assert (busy.value.claim, busy.value.run) == (held, run)
        assert claim_missing(with_states("max_b", {"max_b": "running"}), (B,), TASKS) == ((run, folder, held),), (
            "resumed after a wait for another table, it still holds this one"
        )

    def test_once_the_copy_is_registered_and_released_the_waiters_read_it(self):
        caches = TaskCaches.prepare(with_states("max_b", {}), (B,), TASKS)
        copy = registered_copy("max_b")
        caches.release_claims()
        waiter = TaskCaches.prepare(with_states("min_b", {"max_b": "success"}), (B,), TASKS)
        assert waiter.held == () and waiter.uses[0].registered == (copy,)

    def test_a_holder_that_registered_but_has_not_released_yet_is_not_taken_over(self):
        TaskCaches.prepare(with_states("max_b", {}), (B,), TASKS)
        copy = registered_copy("max_b")
        # Its try ended (the state says so) just before it released: the registry is looked up again first.
        waiter = TaskCaches.prepare(with_states("min_b", {"max_b": "success"}), (B,), TASKS)
        assert waiter.held == () and waiter.uses[0].registered == (copy,)

    def test_a_writer_that_failed_is_taken_over_by_exactly_one_waiter(self):
        TaskCaches.prepare(with_states("max_b", {}), (B,), TASKS).release_claims()  # its job failed: no copy
        [(_, _, taken)] = claim_missing(with_states("min_b", {"max_b": "failed"}), (B,), TASKS)
        assert (taken.number, taken.holder) == (2, owner("min_b"))
        with pytest.raises(CopyBeingComputed) as busy:
            claim_missing(with_states("count_b", {"max_b": "failed", "min_b": "running"}), (B,), TASKS)
        assert busy.value.claim == taken

    @pytest.mark.parametrize("state", ["failed", None])
    def test_a_lost_writer_is_taken_over(self, state):
        claim_missing(with_states("max_b", {}), (B,), TASKS)  # never released: its worker died with it
        [(_, _, taken)] = claim_missing(with_states("min_b", {"max_b": state}), (B,), TASKS)
        assert (taken.number, taken.holder) == (2, owner("min_b"))

    def test_a_lost_writer_up_for_retry_is_waited_for_its_retry_takes_it_over(self):
        claim_missing(with_states("max_b", {}), (B,), TASKS)  # its worker died with it; a retry is due
        with pytest.raises(CopyBeingComputed) as busy:
            claim_missing(with_states("min_b", {"max_b": "up_for_retry"}), (B,), TASKS)
        assert busy.value.claim.holder == owner("max_b")

    def test_the_retry_of_a_lost_writer_takes_over_its_own_claim(self):
        claim_missing(with_states("max_b", {}), (B,), TASKS)
        [(_, _, taken)] = claim_missing(with_states("max_b", {"max_b": "running"}, try_number=2), (B,), TASKS)
        assert (taken.number, taken.holder) == (2, owner("max_b", 2))

    def test_a_retry_that_takes_its_earlier_trys_durable_job_releases_that_trys_claim(self):
        first = TaskCaches.prepare(with_states("max_b", {}), (B,), TASKS)
        retry = TaskCaches.of_launched(ti("max_b", 2), TASKS, first.uses)
        assert retry.held == first.held
        retry.release_claims()
        [(run, folder, _)] = first.held
        assert claims.current(run, folder).released
        assert TaskCaches.of_launched(ti("min_b"), TASKS, first.uses).held == (), "another task's claim is not its"

    def test_a_table_with_a_copy_or_waited_for_past_the_bound_is_not_claimed(self):
        registered_copy("max_b")
        assert claim_missing(with_states("min_b", {}), (B,), TASKS) == ()
        c = CachedTable("c", query="SELECT 1 AS c")
        claim_missing(with_states("max_b", {}), (c,), TASKS)
        assert claim_missing(with_states("min_b", {"max_b": "running"}), (c,), TASKS, [cache_folder_name(c)]) == ()

    def test_tables_are_claimed_in_one_order_whatever_the_tasks_list(self):
        c = CachedTable("c", query="SELECT 1 AS c")
        claim_missing(with_states("max_b", {}), (c, B), TASKS)
        with pytest.raises(CopyBeingComputed) as busy:
            claim_missing(with_states("min_b", {"max_b": "running"}), (c, B), TASKS)
        assert busy.value.table == B, "b before c: the waiter holds nothing the holder may wait for"


class TestTrigger:
    def trigger(self, **fields: Any) -> CachedTableTrigger:
        run = run_folder(settings.cache_uri(), "flip36", "manual__1")
        now = pendulum.now("UTC")
        values = {
            "run": run,
            "cache_folder": cache_folder_name(B),
            "number": 1,
            "check_at": (now + datetime.timedelta(minutes=1)).isoformat(),
            "deadline": (now + datetime.timedelta(hours=1)).isoformat(),
            "poll_seconds": 0.01,
            "cache": "b",
        }
        return CachedTableTrigger(**{**values, **fields})

    def first_event(self, trigger: CachedTableTrigger) -> dict[str, Any]:
        async def first() -> Any:
            async for event in trigger.run():
                return event.payload

        return asyncio.run(asyncio.wait_for(first(), timeout=30))

    def test_it_serializes_to_what_rebuilds_it(self):
        trigger = self.trigger()
        path, kwargs = trigger.serialize()
        assert path == "spark_tables.triggers.cached_table.CachedTableTrigger"
        assert CachedTableTrigger(**kwargs).serialize() == (path, kwargs)

    def test_it_fires_when_the_claim_is_released(self):
        trigger = self.trigger()
        claims.create(trigger.run_folder, trigger.cache_folder, CacheClaim(1, owner("max_b")))
        threading.Timer(0.2, claims.release, (trigger.run_folder, trigger.cache_folder, 1)).start()
        assert self.first_event(trigger) == {"outcome": "released", "cache": "b", "cache_folder": cache_folder_name(B)}

    def test_it_fires_to_check_the_holder_and_at_the_bound(self):
        past = (pendulum.now("UTC") - datetime.timedelta(seconds=1)).isoformat()
        claims.create(self.trigger().run_folder, cache_folder_name(B), CacheClaim(1, owner("max_b")))
        assert self.first_event(self.trigger(check_at=past))["outcome"] == "check_holder"
        assert self.first_event(self.trigger(check_at=past, deadline=past))["outcome"] == "timed_out"


class TestOperatorWaits:
    """The operator defers while another task computes its table, and computes it itself past the bound."""

    def test_a_consumer_defers_and_past_the_bound_computes_the_table_itself(self, monkeypatch):
        from tests.unit.test_cache_operators import flip36

        dag, jobs = flip36(), FakeJobs()
        monkeypatch.setattr("spark_tables.hooks.spark_job.SparkJobHook.run", lambda hook: jobs(hook))
        writer, waiter = context(dag, "max_b"), context(dag, "min_b")
        states = {"max_b": "running"}
        for ctx in (writer, waiter):
            ctx["ti"].get_task_states = lambda dag_id, task_ids, run_ids, map_index: {
                run_ids[0]: {t: states.get(t) for t in task_ids}
            }
        [(_, folder, _)] = claim_missing(writer["ti"], (_table(writer),), TASKS)
        with pytest.raises(TaskDeferred) as deferred:
            dag.get_task("min_b").execute(waiter)
        assert deferred.value.method_name == "execute_after_waiting"
        assert isinstance(deferred.value.trigger, CachedTableTrigger)
        waits = deferred.value.kwargs["waits"]
        assert waits["writers"] == {folder: "max_b"}
        assert jobs.specs == [], "no job ran while waiting"

        past_bound = {"outcome": "timed_out", "cache": "b", "cache_folder": deferred.value.trigger.cache_folder}
        value = dag.get_task("min_b").execute_after_waiting(waiter, event=past_bound, waits=waits)
        assert value["caches"]["b"]["status"] == "miss" and value["caches"]["b"]["waited"]["past_bound"]
        assert value["caches"]["b"]["waited"]["for"] == "max_b"


def _table(ctx: dict[str, Any]) -> CachedTable:
    """The task's b, its query rendered as the task renders it."""
    task = ctx["task"]
    return CachedTable("b", query=task.render_template(task.caches[0].query, ctx))


def test_waits_survive_the_round_trip_through_defer_kwargs():
    busy = CopyBeingComputed(B, "file:///run", CacheClaim(3, owner("max_b")))
    waits = CacheWaits().waiting(busy, "2026-11-26T12:00:00+00:00")
    waits = waits.resumed(cache_folder_name(B), "2026-11-26T12:00:30+00:00", past_bound=False)
    assert CacheWaits.from_dict(waits.to_dict()) == waits
    again = waits.waiting(busy, "2026-11-26T12:00:31+00:00")
    assert again.since == waits.since, "since its first wait"
    ended = again.resumed(cache_folder_name(B), "2026-11-26T13:00:00+00:00", past_bound=True)
    assert ended.summary(B) == {"for": "max_b", "seconds": 3600.0, "past_bound": True}
    assert ended.summary(CachedTable("c", query="SELECT 1 AS c")) is None
