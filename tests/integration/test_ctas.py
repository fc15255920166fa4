"""CTAS through `airflow dags test` on a PostgreSQL metastore: every way a try can end leaves no half-made table.

What the catalog holds is read straight from the metastore's tables in PostgreSQL (TBLS, TABLE_PARAMS), so a
test can watch it while a job runs; what is on disk is read from the warehouse folder.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg
import pytest

from spark_tables.core.catalog import PostgresMetastore
from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, SCENARIOS, VENV_BIN, Deployment

pytestmark = pytest.mark.integration

STATE = "spark_tables.ctas.state"


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    run_id: str


def _scenarios(deployment: Deployment) -> Deployment:
    return deployment.with_dags(SCENARIOS)


def _tables(deployment: Deployment) -> dict[str, dict[str, str]]:
    """The default database's tables in the PostgreSQL metastore, with their properties."""
    assert isinstance(deployment.catalog, PostgresMetastore)
    query = """
        SELECT t."TBL_NAME", p."PARAM_KEY", p."PARAM_VALUE" FROM "TBLS" t
        JOIN "DBS" d ON d."DB_ID" = t."DB_ID" LEFT JOIN "TABLE_PARAMS" p ON p."TBL_ID" = t."TBL_ID"
        WHERE d."NAME" = 'default'
    """
    tables: dict[str, dict[str, str]] = {}
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=deployment.catalog.database) as conn:
        for name, key, value in conn.execute(query):
            tables.setdefault(name, {})
            if key is not None:
                tables[name][key] = value
    return tables


def _related(tables: dict[str, dict[str, str]], table: str) -> set[str]:
    """The table and every staging or replaced table derived from its name."""
    return {name for name in tables if name == table or name.startswith(f"{table}__")}


def _folder(deployment: Deployment, table: str) -> Path:
    assert isinstance(deployment.catalog, PostgresMetastore)
    return Path(deployment.catalog.warehouse) / table


def _data_files(folder: Path) -> list[str]:
    return [f for _, _, files in os.walk(folder) for f in files if f.startswith("part-")]


def _run(deployment: Deployment, dag_id: str, table: str, **conf: object) -> Run:
    done = deployment.airflow("dags", "test", dag_id, "-c", json.dumps({"table": table, **conf}))
    return Run(done.returncode, done.stdout + done.stderr, _last_run_id(deployment, dag_id))


def _last_run_id(deployment: Deployment, dag_id: str) -> str:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        row = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
    return row[0] if row else ""


def _task_states(deployment: Deployment, dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
        ).fetchall()
    return {task: (state, tries) for task, state, tries in rows}


def _xcom(deployment: Deployment, dag_id: str, run_id: str, task_id: str) -> dict | None:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        row = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = 'return_value'",
            (dag_id, run_id, task_id),
        ).fetchone()
    return json.loads(row[0]) if row else None


def _assert_gone(deployment: Deployment, table: str) -> None:
    left = _related(_tables(deployment), table)
    assert left == set(), f"tables left in the catalog: {left}"
    assert not _folder(deployment, table).exists(), f"files left under {_folder(deployment, table)}"
    for name in os.listdir(_folder(deployment, table).parent):
        assert not name.startswith(f"{table}__"), f"a staging or replaced folder was left: {name}"


def _assert_exchange_empty(deployment: Deployment) -> None:
    exchange = deployment.home / "spark_tables" / "exchange"
    assert not exchange.exists() or os.listdir(exchange) == [], f"left in the exchange: {os.listdir(exchange)}"


@pytest.mark.parametrize("atomicity", ["table", "staging"])
def test_a_job_failing_at_run_time_leaves_no_table_and_no_files(postgres: Deployment, atomicity: str) -> None:
    table = f"failing_{atomicity}"
    run = _run(_scenarios(postgres), f"ctas_failing_{atomicity}", table)

    assert run.returncode != 0
    assert _task_states(postgres, f"ctas_failing_{atomicity}", run.run_id)["ctas"][0] == "failed"
    assert "is bad" in run.output, "the task must fail with the job's own error"
    assert "undone: dropped the" in run.output
    _assert_gone(postgres, table)
    _assert_exchange_empty(postgres)


def test_a_table_that_existed_before_survives_every_failure(postgres: Deployment) -> None:
    table = "pre_existing"
    run = _run(_scenarios(postgres), "ctas_pre_existing", table)

    states = _task_states(postgres, "ctas_pre_existing", run.run_id)
    assert {task: state for task, (state, _) in states.items()} == {
        "create": "success",
        "again": "failed",
        "if_not_exists": "success",
        "replace_fails": "failed",
    }
    assert f"table {table} already exists, and this task did not create it" in run.output
    assert _xcom(postgres, "ctas_pre_existing", run.run_id, "if_not_exists")["skipped"] == "table exists"
    tables = _tables(postgres)
    assert _related(tables, table) == {table}, "no staging or replaced table may be left"
    marks = tables[table]
    assert (marks["spark_tables.ctas.task_id"], marks[STATE]) == ("create", "complete")
    assert _data_files(_folder(postgres, table)), "the first task's rows must still be there"
    created = _xcom(postgres, "ctas_pre_existing", run.run_id, "create")
    assert (created["rows"], created["created"]) == (100, True)


def test_a_retry_succeeds_after_the_failed_try_was_undone(postgres: Deployment) -> None:
    table = "retried"
    run = _run(_scenarios(postgres), "ctas_retry", table)

    assert run.returncode == 0, run.output[-4000:]
    assert _task_states(postgres, "ctas_retry", run.run_id)["ctas"] == ("success", 2)
    assert "first try" in run.output and "dropped the unfinished retried of try 1" in run.output
    output = _xcom(postgres, "ctas_retry", run.run_id, "ctas")
    assert (output["rows"], output["created"]) == (100000, True)
    assert _tables(postgres)[table]["spark_tables.ctas.try_number"] == "2"
    _assert_exchange_empty(postgres)


def test_execution_timeout_stops_the_job_which_drops_its_table_before_the_task_fails(postgres: Deployment) -> None:
    table = "timed_out"
    run = _run(_scenarios(postgres), "ctas_timeout", table)

    assert run.returncode != 0
    assert _task_states(postgres, "ctas_timeout", run.run_id)["ctas"][0] == "failed"
    assert f"created {table}, owned by" in run.output, "the timeout must come while the job fills the table"
    assert "AirflowTaskTimeout" in run.output
    dropped = run.output.index(f"dropped the unfinished {table} of try 1")
    assert dropped < run.output.index("Task failed with exception"), "undone by the job, before the task ended"
    assert "cleanup job for" not in run.output, "the job undid it itself: no second application was needed"
    _assert_gone(postgres, table)
    _assert_exchange_empty(postgres)


def _start(deployment: Deployment, dag_id: str, table: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(VENV_BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps({"table": table})],
        env=deployment.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _read_until(process: subprocess.Popen[str], marker: str, lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            return
    raise AssertionError(f"the run ended before {marker!r}:\n{''.join(lines[-60:])}")


def test_sigterm_to_the_task_stops_a_replace_and_keeps_the_old_table(postgres: Deployment) -> None:
    table = "replaced_then_stopped"
    process, lines = _start(_scenarios(postgres), "ctas_replace_endless", table), []
    try:
        _read_until(process, f"created {table}__staging_", lines)

        process.send_signal(signal.SIGTERM)
        lines += process.stdout.readlines()
        process.wait(timeout=120)
    finally:
        process.kill()
    output = "".join(lines)
    assert "cancelled: the Airflow task asked to stop" in output
    assert f"dropped the staging table {table}__staging_" in output
    tables = _tables(postgres)
    assert _related(tables, table) == {table}, "the staging table must be dropped, the old table kept"
    assert tables[table]["spark_tables.ctas.task_id"] == "base"
    assert _data_files(_folder(postgres, table)), "the old table's rows must still be there"
    _assert_exchange_empty(postgres)


def test_sigkill_to_the_task_process_still_undoes_the_replace_and_keeps_the_old_table(postgres: Deployment) -> None:
    table = "replaced_then_killed"
    process, lines = _start(_scenarios(postgres), "ctas_replace_endless", table), []
    try:
        _read_until(process, f"created {table}__staging_", lines)
        spark_processes = psutil.Process(process.pid).children(recursive=True)
        assert spark_processes, "spark-submit must be running"

        process.kill()  # the task process dies outright: nothing of it runs any more
        process.wait()
        _, alive = psutil.wait_procs(spark_processes, timeout=120)
    finally:
        process.kill()
    assert alive == [], f"the Spark application outlived its task: {alive}"
    tables = _tables(postgres)
    assert _related(tables, table) == {table}, "the staging table must be dropped, the old table kept"
    assert tables[table]["spark_tables.ctas.task_id"] == "base"
    assert _data_files(_folder(postgres, table)), "the old table's rows must still be there"
    exchange = postgres.home / "spark_tables" / "exchange"
    claims = sorted(exchange.glob("ctas_replace_endless__*.claim.json"))
    assert len(claims) == 1, "the killed try's claim stays, for a sweep once Airflow knows the task finished"
    for leftover in exchange.glob("ctas_replace_endless__*"):  # what that sweep would remove
        leftover.unlink()


def test_two_concurrent_ctas_to_one_name_exactly_one_wins(postgres: Deployment, postgres_twin: Deployment) -> None:
    table = "contested"
    first, second = _start(_scenarios(postgres), "ctas_slow_staging", table), None
    try:
        second = _start(_scenarios(postgres_twin), "ctas_slow_staging", table)
        outputs = [p.communicate(timeout=600)[0] for p in (first, second)]
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
    codes = [first.returncode, second.returncode]
    assert sorted(codes)[0] == 0 and sorted(codes)[1] != 0, f"exactly one must win: {codes}"
    loser = outputs[codes.index(next(c for c in codes if c != 0))]
    assert "was created meanwhile by another task" in loser or "already exists" in loser
    winner = (postgres, postgres_twin)[codes.index(0)]
    tables = _tables(postgres)
    assert _related(tables, table) == {table}
    assert tables[table]["spark_tables.ctas.run_id"] == _last_run_id(winner, "ctas_slow_staging")
    assert tables[table][STATE] == "complete" and _data_files(_folder(postgres, table))


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
            tables = _tables(self.deployment)
            marks = tables.get(self.table)
            self.seen.append((marks.get("spark_tables.ctas.run_id"), marks.get(STATE)) if marks else (None, None))
            self.staging_seen |= any(name.startswith(f"{self.table}__staging_") for name in tables)


def test_staging_readers_never_see_an_unfinished_table_and_a_replace_keeps_the_old_one(postgres: Deployment) -> None:
    table, scenarios = "published", _scenarios(postgres)
    with MetastoreWatcher(postgres, table) as created:
        first = _run(scenarios, "ctas_slow_replace", table)  # no table yet: created through a staging table
    assert first.returncode == 0, first.output[-4000:]
    assert created.staging_seen, "the watcher must have seen the job at work"
    assert {state for run_id, state in created.seen if run_id is not None} == {"complete"}
    assert created.seen[0] == (None, None) and created.seen[-1] == (first.run_id, "complete")

    with MetastoreWatcher(postgres, table) as replaced:
        second = _run(scenarios, "ctas_slow_replace", table)
    assert second.returncode == 0, second.output[-4000:]
    assert replaced.staging_seen
    owners = [run_id for run_id, _ in replaced.seen]
    first_new = owners.index(second.run_id)
    assert owners[0] == first.run_id, "the old table must be readable while the new one is built"
    assert set(owners[:first_new]) <= {first.run_id, None} and set(owners[first_new:]) == {second.run_id}
    gap = [i for i, owner in enumerate(owners) if owner is None]
    assert all(i == first_new - len(gap) + n for n, i in enumerate(gap)), "absent only for the swap's instant"
    assert {state for _, state in replaced.seen if state} == {"complete"}
    assert _related(_tables(postgres), table) == {table}
    assert len(os.listdir(_folder(postgres, table).parent)) == len(
        {f for f in os.listdir(_folder(postgres, table).parent) if not f.startswith(f"{table}__")}
    ), "no staging or replaced folder may be left"


def test_example_ctas_dag_on_the_embedded_default(embedded: Deployment) -> None:
    deployment = embedded
    done = deployment.airflow("dags", "test", "example_spark_ctas", "2026-11-20")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    snapshot = deployment.xcom("example_spark_ctas", "snapshot_orders")
    assert (snapshot["table"], snapshot["rows"], snapshot["created"]) == ("order_snapshot_20261120", 100000, True)
    assert snapshot["bytes"] > 0 and snapshot["location"].endswith("order_snapshot_20261120")
    totals = deployment.xcom("example_spark_ctas", "publish_customer_totals")
    assert (totals["rows"], totals["atomicity"]) == (7, "staging")

    [[snapshot_rows, regions, customers, orders]] = deployment.read_back(
        "SELECT (SELECT count(*) FROM order_snapshot_20261120),"
        " (SELECT count(DISTINCT region) FROM order_snapshot_20261120),"
        " (SELECT count(*) FROM customer_totals), (SELECT sum(orders) FROM customer_totals)"
    )
    assert (snapshot_rows, regions, customers, orders) == (100000, 3, 7, 100000)
    _assert_exchange_empty(deployment)
