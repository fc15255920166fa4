"""CTAS through `airflow dags test`: every way a try can fail leaves no half-made table, and never touches a table it
did not create, in session mode (the tests' Spark Connect server, on a PostgreSQL metastore); the example DAG per job
on the embedded default. A CTAS job and its undoing are the same code in both modes; what only a per-job driver
does (a stopped or lost driver, a killed task process) is tested per job in ``test_ctas_interrupted.py``,
``test_ctas_scheduler.py``, ``test_as_deployed.py`` and ``test_durable_jobs.py``."""

from __future__ import annotations

import pytest

from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.plugins.monitoring.entries import XComEntry
from spark_tables.plugins.monitoring.summaries import task_summary
from tests.integration.conftest import Deployment, ExampleRun, dags_test
from tests.integration.ctas_checks import (
    STATE,
    assert_exchange_empty,
    assert_gone,
    data_files,
    folder,
    metastore_tables,
    related,
    run_dag,
    task_states,
    with_scenarios,
    xcom,
)

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("atomicity", ["table", "staging"])
def test_a_job_failing_at_run_time_leaves_no_table_and_no_files(in_session: Deployment, atomicity: str) -> None:
    table = f"failing_{atomicity}"
    run = run_dag(with_scenarios(in_session), f"ctas_failing_{atomicity}", table)

    assert run.returncode != 0
    assert task_states(in_session, f"ctas_failing_{atomicity}", run.run_id)["ctas"][0] == "failed"
    assert "is bad" in run.output, "the task must fail with the job's own error"
    assert "undone: dropped the" in run.output
    assert_gone(in_session, table)
    assert_exchange_empty(in_session)
    report = xcom(in_session, f"ctas_failing_{atomicity}", run.run_id, "ctas", key=FAILED_TRY)
    assert report is not None, "a failed try leaves its report for the monitoring tab"
    assert (report["try_number"], report["table"]) == (1, table) and "is bad" in report["error"]
    [steps] = [t["steps"] for t in task_summary([XComEntry("ctas", -1, FAILED_TRY, report)])["ctas"]]
    assert steps[-2].startswith("try 1 failed: ") and "is bad" in steps[-2]
    assert steps[-1].startswith("undone by the job: dropped the ") and table in steps[-1], steps


def test_a_table_that_existed_before_survives_every_failure(in_session: Deployment) -> None:
    table = "pre_existing"
    run = run_dag(with_scenarios(in_session), "ctas_pre_existing", table)

    states = task_states(in_session, "ctas_pre_existing", run.run_id)
    assert {task: state for task, (state, _) in states.items()} == {
        "create": "success",
        "again": "failed",
        "if_not_exists": "success",
        "replace_fails": "failed",
    }
    assert f"table {table} already exists, and this task did not create it" in run.output
    assert xcom(in_session, "ctas_pre_existing", run.run_id, "if_not_exists")["skipped"] == "table exists"
    tables = metastore_tables(in_session)
    assert related(tables, table) == {table}, "no staging or replaced table may be left"
    marks = tables[table]
    assert (marks["spark_tables.ctas.task_id"], marks[STATE]) == ("create", "complete")
    assert data_files(folder(in_session, table)), "the first task's rows must still be there"
    created = xcom(in_session, "ctas_pre_existing", run.run_id, "create")
    assert (created["rows"], created["created"], created["mode"]) == (100, True, "session")


def test_a_retry_succeeds_after_the_failed_try_was_undone(in_session: Deployment) -> None:
    table = "retried"
    run = run_dag(with_scenarios(in_session), "ctas_retry", table)

    assert run.returncode == 0, run.output[-4000:]
    assert task_states(in_session, "ctas_retry", run.run_id)["ctas"] == ("success", 2)
    assert "first try" in run.output and "dropped the unfinished retried of try 1" in run.output
    output = xcom(in_session, "ctas_retry", run.run_id, "ctas")
    assert (output["rows"], output["created"], output["mode"]) == (100000, True, "session")
    assert metastore_tables(in_session)[table]["spark_tables.ctas.try_number"] == "2"
    assert_exchange_empty(in_session)


def test_a_sql_job_failing_after_its_ctas_statements_leaves_none_of_their_tables(in_session: Deployment) -> None:
    table = "sql_failing"
    run = run_dag(with_scenarios(in_session), "sql_ctas_failing", table)

    assert run.returncode != 0
    assert task_states(in_session, "sql_ctas_failing", run.run_id)["sql"][0] == "failed"
    assert "statement 3/3 failed: [USER_RAISED_EXCEPTION] row " in run.output, (
        "the job's own error, naming the statement"
    )
    undone = f"dropped the unfinished {table} of try 1; dropped the unfinished {table}_totals of try 1"
    assert f"(undone: {undone})" in run.output
    assert_gone(in_session, table)
    assert_gone(in_session, f"{table}_totals")
    assert_exchange_empty(in_session)


def test_example_ctas_dag_on_the_embedded_default(embedded: Deployment) -> None:
    check_example_ctas(dags_test(embedded, "example_spark_ctas", "2026-11-20"))


def check_example_ctas(run: ExampleRun) -> None:
    """What the example's run for 2026-11-20 did."""
    snapshot = run.xcoms["snapshot_orders"]
    assert (snapshot["table"], snapshot["rows"], snapshot["created"]) == ("order_snapshot_20261120", 100000, True)
    assert snapshot["bytes"] > 0 and snapshot["location"].endswith("order_snapshot_20261120")
    totals = run.xcoms["publish_customer_totals"]
    assert (totals["rows"], totals["atomicity"], totals["format"]) == (7, "commit", "delta")
    assert (totals["committed_version"], totals["files"] > 0, totals["bytes"] > 0) == (0, True, True), "from its commit"

    [[snapshot_rows, regions, customers, orders]] = run.deployment.read_back(
        "SELECT (SELECT count(*) FROM order_snapshot_20261120),"
        " (SELECT count(DISTINCT region) FROM order_snapshot_20261120),"
        " (SELECT count(*) FROM customer_totals), (SELECT sum(orders) FROM customer_totals)"
    )
    assert (snapshot_rows, regions, customers, orders) == (100000, 3, 7, 100000)
    assert_exchange_empty(run.deployment)
