"""Claims: the note a CTAS task keeps of the table its tries may leave, and which claims a later task may sweep."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.exchange import claim_uri, local_path
from spark_tables.tasks.ctas import claims as ctas_claims
from spark_tables.tasks.ctas.claims import Claim, read_claim, release_claim, sweepable, write_claim
from spark_tables.utils import settings

pytestmark = pytest.mark.usefixtures("spark_tables_home")

_RUN = "scheduled__2026-01-01T00:00:00+00:00"
_OWNER = TableOwner(dag_id="sales", run_id=_RUN, task_id="load", map_index=-1, try_number=2)
_CATALOG = "spark_tables_default"


class _FakeTi:
    """The task instance running a CTAS: who it is, and the task states Airflow's API would report.

    ``states`` maps ``(dag_id, run_id, task_id, map_index)`` to a state; the answer has the API's shape:
    ``{run_id: {task_id: state}}``, a mapped task's key being ``f"{task_id}_{map_index}"``.
    """

    def __init__(
        self,
        states: dict[tuple[str, str, str, int], str | None] | None = None,
        *,
        dag_id: str = "reports",
        run_id: str = _RUN,
        task_id: str = "build",
        map_index: int = -1,
    ) -> None:
        self.dag_id, self.run_id, self.task_id, self.map_index = dag_id, run_id, task_id, map_index
        self.states = states or {}
        self.asked: list[dict[str, Any]] = []

    def get_task_states(
        self, dag_id: str, task_ids: list[str], run_ids: list[str], map_index: int | None
    ) -> dict[str, dict[str, str | None]]:
        self.asked.append({"dag_id": dag_id, "task_ids": task_ids, "run_ids": run_ids, "map_index": map_index})
        found: dict[str, dict[str, str | None]] = {}
        for (dag, run, task, index), state in self.states.items():
            if dag != dag_id or run not in run_ids or task not in task_ids:
                continue
            if map_index is not None and index != map_index:
                continue
            found.setdefault(run, {})[task if index < 0 else f"{task}_{index}"] = state
        return found


def _claim(table: str = "db.sales", catalog_conn_id: str = _CATALOG, **owner: Any) -> Claim:
    return Claim((table,), dataclasses.replace(_OWNER, **owner), catalog_conn_id)


def _key(owner: TableOwner) -> tuple[str, str, str, int]:
    return owner.dag_id, owner.run_id, owner.task_id, owner.map_index


def _claim_path(owner: TableOwner) -> Path:
    uri = claim_uri(
        settings.exchange_uri(),
        dag_id=owner.dag_id,
        run_id=owner.run_id,
        task_id=owner.task_id,
        map_index=owner.map_index,
    )
    return Path(local_path(uri))


def _tables(claims: list[Claim]) -> list[str]:
    return sorted(table for claim in claims for table in claim.tables)


class TestClaimFiles:
    def test_a_claim_survives_json(self):
        claim = Claim(("cat.`my db`.t", "db.other"), dataclasses.replace(_OWNER, map_index=3), _CATALOG)

        again = Claim.from_json(claim.to_json())

        assert again == claim
        assert isinstance(again.owner, TableOwner)

    def test_the_json_names_tables_owner_and_catalog(self):
        assert json.loads(_claim().to_json()) == {
            "tables": ["db.sales"],
            "owner": dataclasses.asdict(_OWNER),
            "catalog_conn_id": _CATALOG,
            "durable": False,
        }

    def test_write_claim_creates_the_exchange_folder_and_one_flat_file(self, spark_tables_home):
        write_claim(_claim())

        path = _claim_path(_OWNER)
        assert path.parent == spark_tables_home / "exchange"
        assert [p.name for p in path.parent.iterdir()] == [path.name]
        assert path.name.endswith(".claim.json")
        assert Claim.from_json(path.read_text()) == _claim()

    def test_read_claim_gives_the_written_claim(self):
        write_claim(_claim())

        assert read_claim(_OWNER) == _claim()

    def test_read_claim_without_a_claim_gives_none(self):
        assert read_claim(_OWNER) is None

    def test_any_try_of_the_task_reads_the_same_claim(self):
        write_claim(_claim())

        assert read_claim(dataclasses.replace(_OWNER, try_number=5)) == _claim()

    def test_a_later_try_overwrites_the_claim(self):
        write_claim(_claim())
        write_claim(_claim(try_number=3))

        assert read_claim(_OWNER) == _claim(try_number=3)
        assert len(list(_claim_path(_OWNER).parent.iterdir())) == 1

    def test_claims_of_other_tasks_are_other_files(self):
        write_claim(_claim(table="db.a"))
        write_claim(_claim(table="db.b", map_index=0))
        write_claim(_claim(table="db.c", run_id="manual__x"))

        assert read_claim(_OWNER).tables == ("db.a",)
        assert read_claim(dataclasses.replace(_OWNER, map_index=0)).tables == ("db.b",)
        assert read_claim(dataclasses.replace(_OWNER, run_id="manual__x")).tables == ("db.c",)

    def test_release_claim_removes_only_that_claim(self):
        write_claim(_claim(table="db.a"))
        write_claim(_claim(table="db.b", map_index=0))

        release_claim(dataclasses.replace(_OWNER, try_number=9))

        assert read_claim(_OWNER) is None
        assert not _claim_path(_OWNER).exists()
        assert read_claim(dataclasses.replace(_OWNER, map_index=0)).tables == ("db.b",)

    def test_release_claim_without_a_claim_does_nothing(self):
        release_claim(_OWNER)

        assert read_claim(_OWNER) is None


class TestSweepable:
    def test_nothing_is_sweepable_before_the_exchange_exists(self, spark_tables_home):
        ti = _FakeTi()

        assert sweepable(ti, _CATALOG) == []
        assert not (spark_tables_home / "exchange").exists()
        assert ti.asked == []

    def test_nothing_is_sweepable_without_claims(self, spark_tables_home):
        (spark_tables_home / "exchange").mkdir(parents=True)
        (spark_tables_home / "exchange" / "sales__r__load__-1__1__0123456789ab.json").write_text("{}")

        assert sweepable(_FakeTi(), _CATALOG) == []

    @pytest.mark.parametrize("state", sorted(ctas_claims.FINISHED_STATES))
    def test_a_claim_of_a_finished_task_is_sweepable(self, state):
        write_claim(_claim())

        assert sweepable(_FakeTi({_key(_OWNER): state}), _CATALOG) == [_claim()]

    def test_finished_states_are_exactly_these(self):
        assert {"success", "failed", "skipped", "upstream_failed", "removed"} == ctas_claims.FINISHED_STATES

    def test_a_claim_of_a_task_airflow_does_not_know_is_not_sweepable_as_it_may_run_again(self):
        write_claim(_claim())
        ti = _FakeTi()

        assert sweepable(ti, _CATALOG) == []
        assert ti.asked == [{"dag_id": "sales", "task_ids": ["load"], "run_ids": [_RUN], "map_index": None}]

    def test_a_claim_of_a_task_without_a_state_is_not_sweepable_as_it_may_run_again(self):
        write_claim(_claim())

        assert sweepable(_FakeTi({_key(_OWNER): None}), _CATALOG) == []

    @pytest.mark.parametrize(
        "state", ["running", "queued", "up_for_retry", "scheduled", "deferred", "up_for_reschedule", "restarting"]
    )
    def test_a_claim_of_a_task_that_runs_or_will_run_is_not_sweepable(self, state):
        write_claim(_claim())

        assert sweepable(_FakeTi({_key(_OWNER): state}), _CATALOG) == []

    def test_the_state_is_asked_for_the_claiming_task_and_run(self):
        write_claim(_claim())
        ti = _FakeTi({_key(_OWNER): "failed"})

        sweepable(ti, _CATALOG)

        assert ti.asked == [{"dag_id": "sales", "task_ids": ["load"], "run_ids": [_RUN], "map_index": None}]

    def test_the_state_of_another_run_or_dag_is_not_taken_for_the_claimant(self):
        write_claim(_claim())
        ti = _FakeTi({("sales", "manual__x", "load", -1): "success", ("other", _RUN, "load", -1): "success"})
        ti.states[_key(_OWNER)] = "running"

        assert sweepable(ti, _CATALOG) == []

    def test_the_own_task_claim_is_never_sweepable(self):
        write_claim(_claim(table="db.mine", dag_id="reports", task_id="build", try_number=1))
        ti = _FakeTi({("reports", _RUN, "build", -1): "failed"}, dag_id="reports", task_id="build")

        assert sweepable(ti, _CATALOG) == []
        assert ti.asked == []

    def test_the_own_mapped_task_claim_is_never_sweepable_but_a_sibling_map_index_is(self):
        write_claim(_claim(table="db.mine", task_id="build", map_index=2))
        write_claim(_claim(table="db.sibling", task_id="build", map_index=3))
        ti = _FakeTi(
            {("sales", _RUN, "build", 2): "success", ("sales", _RUN, "build", 3): "success"},
            dag_id="sales",
            task_id="build",
            map_index=2,
        )

        assert _tables(sweepable(ti, _CATALOG)) == ["db.sibling"]

    @pytest.mark.parametrize(
        "ti_fields", [{"run_id": "manual__x"}, {"dag_id": "other"}, {"task_id": "other"}, {"map_index": 0}]
    )
    def test_the_same_task_id_elsewhere_is_another_task(self, ti_fields):
        write_claim(_claim())
        ti = _FakeTi({_key(_OWNER): "failed"}, **{"dag_id": "sales", "task_id": "load", "map_index": -1, **ti_fields})

        assert sweepable(ti, _CATALOG) == [_claim()]

    def test_claims_on_other_catalogs_are_not_sweepable(self):
        write_claim(_claim(table="db.here"))
        write_claim(_claim(table="db.there", catalog_conn_id="other_catalog", task_id="other"))
        ti = _FakeTi({_key(_OWNER): "failed", ("sales", _RUN, "other", -1): "failed"})

        assert _tables(sweepable(ti, _CATALOG)) == ["db.here"]
        assert _tables(sweepable(ti, "other_catalog")) == ["db.there"]

    @pytest.mark.parametrize(("state", "swept"), [("failed", True), ("success", True), ("running", False)])
    def test_a_mapped_claim_reads_the_state_of_its_map_index(self, state, swept):
        write_claim(_claim(map_index=4))
        ti = _FakeTi({("sales", _RUN, "load", 4): state, ("sales", _RUN, "load", 5): "running"})

        found = sweepable(ti, _CATALOG)

        assert found == ([_claim(map_index=4)] if swept else [])
        assert ti.asked == [{"dag_id": "sales", "task_ids": ["load"], "run_ids": [_RUN], "map_index": 4}]

    def test_a_mapped_claim_does_not_read_the_state_of_another_map_index(self):
        write_claim(_claim(map_index=4))
        ti = _FakeTi({("sales", _RUN, "load", 4): "running"})
        ti.get_task_states = lambda **kwargs: {_RUN: {"load": "success", "load_5": "success", "load_4": "running"}}

        assert sweepable(ti, _CATALOG) == []

    def test_an_unmapped_claim_reads_the_unmapped_key(self):
        write_claim(_claim())
        ti = _FakeTi()
        ti.get_task_states = lambda **kwargs: {_RUN: {"load": "running", "load_0": "success"}}

        assert sweepable(ti, _CATALOG) == []

    def test_only_the_finished_tasks_of_many_are_sweepable_not_the_stateless_or_unknown(self):
        states = {"a": "success", "b": "running", "c": "upstream_failed", "d": "queued", "e": None}
        for task_id in [*states, "f"]:  # e: no state (cleared), f: unknown to Airflow; either may run again
            write_claim(_claim(table=f"db.{task_id}", task_id=task_id))
        ti = _FakeTi({("sales", _RUN, task_id, -1): state for task_id, state in states.items()})

        assert _tables(sweepable(ti, _CATALOG)) == ["db.a", "db.c"]

    def test_a_released_claim_is_not_sweepable(self):
        write_claim(_claim())
        release_claim(_OWNER)

        assert sweepable(_FakeTi({_key(_OWNER): "failed"}), _CATALOG) == []
