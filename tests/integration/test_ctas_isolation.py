"""CTAS beside other writers and readers: two installations racing for one name, and a reader polling the
metastore every 20 ms while a staging CTAS and a REPLACE run; in session mode, both installations' tasks on the
tests' Spark Connect server (its PostgreSQL metastore), each in a session of its own. What they race for and what
the reader sees is the catalog's, the same per job (``tests/spark/test_ctas_job.py`` races two CTAS onto one
``LOCATION`` in one application)."""

from __future__ import annotations

import os
import threading

import pytest

from tests.integration.conftest import Deployment
from tests.integration.ctas_checks import (
    STATE,
    data_files,
    folder,
    last_run_id,
    metastore_tables,
    related,
    run_dag,
    start_dag,
    with_scenarios,
    xcom,
)

pytestmark = pytest.mark.integration


def test_two_concurrent_ctas_to_one_name_exactly_one_wins(in_session: Deployment, in_session_twin: Deployment) -> None:
    table = "contested"
    first, second = start_dag(with_scenarios(in_session), "ctas_slow_staging", table), None
    try:
        second = start_dag(with_scenarios(in_session_twin), "ctas_slow_staging", table)
        outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
    codes = [first.returncode, second.returncode]
    assert sorted(codes)[0] == 0 and sorted(codes)[1] != 0, f"exactly one must win: {codes}"
    loser = outputs[codes.index(next(c for c in codes if c != 0))]
    assert "was created meanwhile by another task" in loser or "already exists" in loser
    winner = (in_session, in_session_twin)[codes.index(0)]
    tables = metastore_tables(in_session)
    assert related(tables, table) == {table}
    assert tables[table]["spark_tables.ctas.run_id"] == last_run_id(winner, "ctas_slow_staging")
    assert tables[table][STATE] == "complete" and data_files(folder(in_session, table))


class MetastoreWatcher:
    """Polls the metastore while a job runs and records what a reader would have seen of one table name."""

    def __init__(self, deployment: Deployment, table: str) -> None:
        self.deployment, self.table = deployment, table
        self.seen: list[tuple[str | None, str | None]] = []  # (run_id, state) of the final name, None if absent
        self.staging_seen = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll)

    def __enter__(self) -> MetastoreWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.02):
            tables = metastore_tables(self.deployment)
            marks = tables.get(self.table)
            self.seen.append((marks.get("spark_tables.ctas.run_id"), marks.get(STATE)) if marks else (None, None))
            self.staging_seen |= any(name.startswith(f"{self.table}__staging_") for name in tables)


def test_staging_readers_never_see_an_unfinished_table_and_a_replace_keeps_the_old_one(in_session: Deployment) -> None:
    table, scenarios = "published", with_scenarios(in_session)
    with MetastoreWatcher(in_session, table) as created:
        first = run_dag(scenarios, "ctas_slow_replace", table)  # no table yet: created through a staging table
    assert first.returncode == 0, first.output[-4000:]
    assert xcom(in_session, "ctas_slow_replace", first.run_id, "ctas")["mode"] == "session"
    assert created.staging_seen, "the watcher must have seen the job at work"
    assert {state for run_id, state in created.seen if run_id is not None} == {"complete"}
    assert created.seen[0] == (None, None) and created.seen[-1] == (first.run_id, "complete")

    with MetastoreWatcher(in_session, table) as replaced:
        second = run_dag(scenarios, "ctas_slow_replace", table)
    assert second.returncode == 0, second.output[-4000:]
    assert replaced.staging_seen
    owners = [run_id for run_id, _ in replaced.seen]
    first_new = owners.index(second.run_id)
    assert owners[0] == first.run_id, "the old table must be readable while the new one is built"
    assert set(owners[:first_new]) <= {first.run_id, None} and set(owners[first_new:]) == {second.run_id}
    gap = [i for i, owner in enumerate(owners) if owner is None]
    assert all(i == first_new - len(gap) + n for n, i in enumerate(gap)), "absent only for the swap's instant"
    assert {state for _, state in replaced.seen if state} == {"complete"}
    assert related(metastore_tables(in_session), table) == {table}
    assert len(os.listdir(folder(in_session, table).parent)) == len(
        {f for f in os.listdir(folder(in_session, table).parent) if not f.startswith(f"{table}__")}
    ), "no staging or replaced folder may be left"
