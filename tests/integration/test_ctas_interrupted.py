"""CTAS stopped from outside while its job runs (an execution timeout, SIGTERM to the task, SIGKILL to the task
process): the job's table is dropped and a table it replaces survives. The first two in both modes: per-job
(spark-submit, on a PostgreSQL metastore) and session (on a Spark Connect server, where nothing of the job may be
left running)."""

from __future__ import annotations

import signal
from typing import Any

import psutil
import pytest

from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.jobs.cancellation import DEFAULT_DEADLINE_SECONDS
from spark_tables.utils.metastore_schema import ensure_metastore_schema
from tests.integration.airflow_services import wait_for
from tests.integration.conftest import Deployment
from tests.integration.ctas_checks import (
    assert_exchange_empty,
    assert_gone,
    data_files,
    folder,
    metastore_tables,
    read_to_the_end,
    read_until,
    related,
    run_dag,
    start_dag,
    task_states,
    with_scenarios,
)

pytestmark = pytest.mark.integration

#: Each mode's deployment: per-job on a PostgreSQL metastore, and session on the Spark Connect server's.
MODES = ("postgres", "in_session")


def assert_nothing_left_running(request: pytest.FixtureRequest, name: str) -> None:
    """In session mode, no Spark job of the stopped task still runs on the server (its REST API says)."""
    if name == "in_session":
        running = request.getfixturevalue("connect_server").running_jobs()
        assert running == [], f"Spark jobs still run on the server: {[job.get('name') for job in running]}"


@pytest.mark.parametrize("name", MODES)
def test_execution_timeout_stops_the_job_which_drops_its_table_before_the_task_fails(
    name: str, request: pytest.FixtureRequest
) -> None:
    deployment: Deployment = request.getfixturevalue(name)
    table = f"timed_out_{name}"
    if isinstance(deployment.catalog, PostgresMetastore):  # its schema made now, not within the task's timeout
        ensure_metastore_schema(deployment.catalog)
    dag_id = "ctas_timeout_in_session" if name == "in_session" else "ctas_timeout_per_job"
    run = run_dag(with_scenarios(deployment), dag_id, table)

    assert run.returncode != 0
    assert task_states(deployment, dag_id, run.run_id)["ctas"][0] == "failed"
    assert f"created {table}, owned by" in run.output, "the timeout must come while the job fills the table"
    assert "AirflowTaskTimeout" in run.output
    dropped = run.output.index(f"dropped the unfinished {table} of try 1")
    assert dropped < run.output.index("Task failed with exception"), "undone by the job, before the task ended"
    assert "cleanup job for" not in run.output, "the job undid it itself: no second application was needed"
    assert_gone(deployment, table)
    assert_exchange_empty(deployment)
    assert_nothing_left_running(request, name)


def assert_old_table_kept(deployment: Deployment, table: str) -> None:
    """The REPLACE was undone: its staging table dropped, the table the scenario's ``base`` task made still there."""
    tables = metastore_tables(deployment)
    assert related(tables, table) == {table}, "the staging table must be dropped, the old table kept"
    assert tables[table]["spark_tables.ctas.task_id"] == "base"
    assert data_files(folder(deployment, table)), "the old table's rows must still be there"


def wait_for_the_fill(connect_server: Any) -> None:
    """Until the replace's fill runs as a Spark job on the server: an interrupt that lands earlier, while the
    server's thread sets up the fill's output folder, can be lost there (Hadoop's ``chmod`` swallows it, SPARK-20301),
    and the endless fill would then run on; what the task does then is tested in ``test_session_mode.py``."""
    wait_for(
        "the fill's Spark job to run on the server",
        lambda: connect_server.running_jobs_tagged("ctas_replace_endless.replace"),
    )


@pytest.mark.parametrize("name", MODES)
def test_sigterm_to_the_task_stops_a_replace_and_keeps_the_old_table(name: str, request: pytest.FixtureRequest) -> None:
    deployment: Deployment = request.getfixturevalue(name)
    table = f"replaced_then_stopped_{name}"
    process, lines = start_dag(with_scenarios(deployment), "ctas_replace_endless", table), []
    try:
        read_until(process, f"created {table}__staging_", lines)
        if name == "in_session":  # stopped while its fill's Spark job runs (see wait_for_the_fill)
            wait_for_the_fill(request.getfixturevalue("connect_server"))

        process.send_signal(signal.SIGTERM)
        read_to_the_end(process, lines, DEFAULT_DEADLINE_SECONDS + 30)
    finally:
        process.kill()
    output = "".join(lines)
    assert "cancelled: the Airflow task asked to stop" in output
    assert f"dropped the staging table {table}__staging_" in output
    assert_old_table_kept(deployment, table)
    assert_exchange_empty(deployment)
    assert_nothing_left_running(request, name)


def test_sigkill_to_the_task_process_still_undoes_the_replace_and_keeps_the_old_table(postgres: Deployment) -> None:
    table = "replaced_then_killed"
    process, lines = start_dag(with_scenarios(postgres), "ctas_replace_endless", table), []
    try:
        read_until(process, f"created {table}__staging_", lines)
        spark_processes = psutil.Process(process.pid).children(recursive=True)
        assert spark_processes, "spark-submit must be running"

        process.kill()  # the task process dies outright: nothing of it runs any more
        process.wait()
        _, alive = psutil.wait_procs(spark_processes, timeout=DEFAULT_DEADLINE_SECONDS + 30)
    finally:
        process.kill()
    assert alive == [], f"the Spark application outlived its task: {alive}"
    assert_old_table_kept(postgres, table)
    exchange = postgres.home / "spark_tables" / "exchange"
    claims = sorted(exchange.glob("ctas_replace_endless__*.claim.json"))
    assert len(claims) == 1, "the killed try's claim stays, for a sweep once Airflow knows the task finished"
    for leftover in exchange.glob("ctas_replace_endless__*"):  # what that sweep would remove
        leftover.unlink()
