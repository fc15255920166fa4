"""CTAS and REPLACE on Delta Lake (``jobs/table_format/delta.py``): Delta's own atomic CREATE and REPLACE TABLE AS
SELECT, FLIP-218's marks, XCom and cleanup. The jobs run on a Spark Connect server whose catalog loads Delta
(``delta_server``) as session mode runs them (``run_job`` on a session of the server; one through session mode's
hook); per job, with spark-submit, test_delta_catalog.py makes one on the PostgreSQL metastore."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.ctas.job import CtasJob
from spark_tables.core.ctas.ownership import PREFIX, REPLACED_VERSION, STATE, TableOwner
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.entry import run_job
from spark_tables.tasks.sql_reader import read_statements
from tests.spark.catalog_checks import wait_until

pytestmark = pytest.mark.integration

#: A row a millisecond, in one task that a stop interrupts: it holds one of the server's two cores, the other reads.
SLEEPING_QUERY = (
    "SELECT id, reflect('java.lang.Thread', 'sleep', CAST(1 AS BIGINT)) AS slept FROM range(0, 10000000000, 1, 1)"
)
#: Fails at run time, once its first rows are written: Delta has data files of it, and no commit.
FAILING_AFTER_ROWS = "SELECT id, CASE WHEN id > 50 THEN raise_error('boom') ELSE id END AS v FROM range(100)"


def _owner(task_id: str = "make", try_number: int = 1) -> TableOwner:
    return TableOwner(dag_id="lake", run_id="manual__1", task_id=task_id, try_number=try_number)


def _ctas(table: str, query: str, **fields: Any) -> CtasJob:
    return CtasJob(table=table, owner=fields.pop("owner", _owner()), query=query, format="delta", **fields)


def _sql(statements: list[str], owner: TableOwner) -> SqlJob:
    """The job, its statements read as the operator reads them."""
    return SqlJob(statements=read_statements(statements), owner=owner)


def _history(spark: Any, table: str) -> list[tuple[int, str]]:
    rows = spark.sql(f"DESCRIBE HISTORY {table}").orderBy("version").collect()
    return [(row["version"], row["operation"]) for row in rows]


def _marks(spark: Any, table: str) -> dict[str, str]:
    return {row[0]: row[1] for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect() if row[0].startswith(PREFIX)}


def test_a_ctas_is_one_commit_with_its_marks_and_reports_that_commit_s_metrics(lake: tuple[Any, str]) -> None:
    spark, database = lake
    table = f"{database}.made"

    result = run_job(spark, _ctas(table, "SELECT id, id % 3 AS k FROM range(100)", partitioned_by=["k"]))

    assert result.succeeded, result.error
    output = result.output
    assert (output.created, output.atomicity, output.format, output.rows, output.committed_version) == (
        True,
        "commit",
        "delta",
        100,
        0,
    )
    assert output.bytes > 0 and output.files >= 3, "a file a partition at least"
    assert output.location.endswith(f"/{database}.db/made")
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT")]
    assert _marks(spark, table) == {**_owner().properties("complete")}
    assert spark.sql(f"SELECT count(*), count(DISTINCT k) FROM {table}").first() == (100, 3)
    json.dumps(result.output_fields())  # what goes to XCom


def test_a_replace_is_one_commit_that_keeps_the_old_version_in_the_history(lake: tuple[Any, str]) -> None:
    spark, database = lake
    table = f"{database}.replaced"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id FROM range(100)")  # another system's table

    result = run_job(spark, _ctas(table, "SELECT id, 'new' AS v FROM range(50)", replace=True))

    assert result.succeeded, result.error
    output = result.output
    assert (output.created, output.replaced, output.rows, output.committed_version) == (True, True, 50, 1)
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT"), (1, "REPLACE TABLE AS SELECT")]
    assert spark.sql(f"SELECT count(*) FROM {table} VERSION AS OF 0").first()[0] == 100, "time travel to the old"
    assert spark.table(table).columns == ["id", "v"] and spark.table(table).count() == 50
    assert _marks(spark, table)[REPLACED_VERSION] == "0"


def test_a_failed_ctas_leaves_no_table_and_its_retry_makes_it(lake: tuple[Any, str]) -> None:
    spark, database = lake
    table = f"{database}.failed"

    failed = run_job(spark, _ctas(table, FAILING_AFTER_ROWS))
    retried = run_job(spark, _ctas(table, "SELECT id FROM range(7)", owner=_owner(try_number=2)))

    assert failed.error.startswith("[TASK_WRITE_FAILED] Task failed while writing rows"), failed.error
    assert failed.output.undone == [] and failed.output.created is None, "nothing was made, nothing undone"
    assert retried.succeeded, retried.error
    assert (retried.output.rows, retried.output.committed_version) == (7, 0)
    assert spark.table(table).count() == 7


def test_a_failed_replace_leaves_the_old_version_current(lake: tuple[Any, str]) -> None:
    spark, database = lake
    table = f"{database}.kept"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, id AS v FROM range(10)")

    failed = run_job(spark, _ctas(table, FAILING_AFTER_ROWS, replace=True))

    assert failed.error.startswith("[TASK_WRITE_FAILED] Task failed while writing rows"), failed.error
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT")]
    assert spark.table(table).count() == 10 and _marks(spark, table) == {}


def test_the_old_version_stays_readable_while_a_replace_runs_and_a_stopped_replace_changes_nothing(
    lake: tuple[Any, str], delta_server: Any
) -> None:
    from spark_tables.hooks.spark_connect_job import connect_session

    spark, database = lake
    table = f"{database}.busy"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id FROM range(10)")
    cancellation = Cancellation()
    results: list[Any] = []
    with connect_session(delta_server.url) as replacing:
        cancellation.interrupt_with(replacing.interruptAll)
        job = _ctas(table, SLEEPING_QUERY, replace=True)
        runner = threading.Thread(target=lambda: results.append(run_job(replacing, job, cancellation)), daemon=True)
        runner.start()
        assert wait_until(lambda: bool(delta_server.running_jobs()), 60), "the replace's Spark job runs"

        assert spark.table(table).count() == 10, "the old version, read while the replace writes"
        cancellation.request("the test stops it")
        runner.join(timeout=120)

    assert not runner.is_alive()
    [result] = results
    assert result.error.startswith("cancelled: the test stops it"), result.error
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT")]
    assert spark.table(table).count() == 10


def test_a_sql_job_s_tables_are_complete_after_its_last_statement(lake: tuple[Any, str]) -> None:
    spark, database = lake
    table, owner = f"{database}.statements", _owner("statements")
    statements = [f"CREATE TABLE {table} USING delta AS SELECT id FROM range(5)", f"SELECT count(*) FROM {table}"]

    result = run_job(spark, _sql(statements, owner))

    assert result.succeeded, result.error
    [report] = result.output.ctas
    assert (report.created, report.atomicity, report.rows, report.committed_version) == (True, "commit", 5, 0)
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT"), (1, "SET TBLPROPERTIES")]
    assert _marks(spark, table)[STATE] == "complete"


def test_a_sql_job_that_fails_later_drops_its_new_table_and_restores_the_one_it_replaced(
    lake: tuple[Any, str],
) -> None:
    spark, database = lake
    made, replaced, owner = f"{database}.made", f"{database}.replaced", _owner("statements")
    spark.sql(f"CREATE TABLE {replaced} USING delta AS SELECT id FROM range(10)")
    statements = [
        f"CREATE TABLE {made} USING delta AS SELECT id FROM range(5)",
        f"REPLACE TABLE {replaced} USING delta AS SELECT id FROM range(3)",
        "SELECT raise_error('a later statement fails')",
    ]

    result = run_job(spark, _sql(statements, owner))

    assert result.error.startswith("statement 3/3 failed: [USER_RAISED_EXCEPTION] a later statement fails")
    assert result.output.undone == [
        f"dropped the unfinished {made} of try 1",
        f"restored version 0 of {replaced}, which the unfinished replace of try 1 replaced",
    ]
    assert not spark.catalog.tableExists(made)
    assert _history(spark, replaced) == [
        (0, "CREATE TABLE AS SELECT"),
        (1, "REPLACE TABLE AS SELECT"),
        (2, "RESTORE"),
    ]
    assert spark.table(replaced).count() == 10 and _marks(spark, replaced) == {}


def test_a_ctas_statement_without_using_makes_a_table_of_the_session_s_default_format(lake: tuple[Any, str]) -> None:
    spark, database = lake
    table, owner = f"{database}.by_default", _owner("statements")
    spark.conf.set("spark.sql.sources.default", "delta")  # as a catalog whose extra default-format is delta sets it

    result = run_job(spark, _sql([f"CREATE TABLE {table} AS SELECT id FROM range(6)"], owner))

    assert result.succeeded, result.error
    [report] = result.output.ctas
    assert (report.format, report.atomicity, report.rows, report.committed_version) == ("delta", "commit", 6, 0)
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT"), (1, "SET TBLPROPERTIES")]


def test_a_replace_that_would_change_a_table_s_format_is_refused_before_anything_is_written(
    lake: tuple[Any, str],
) -> None:
    spark, database = lake
    table = f"{database}.files"
    spark.sql(f"CREATE TABLE {table} USING parquet AS SELECT id FROM range(4)")

    result = run_job(spark, _ctas(table, "SELECT id FROM range(9)", replace=True))

    assert result.error == (
        f"table {table} is a parquet table, and REPLACE TABLE ... USING delta would change its format: replace it "
        "USING parquet, or drop it first to make it anew as delta"
    )
    assert spark.table(table).count() == 4
    assert [t.name for t in spark.catalog.listTables(database)] == ["files"], "no staging table either"


def test_two_ctas_of_one_name_at_once_one_wins_and_the_other_removes_nothing_of_its(
    lake: tuple[Any, str], delta_server: Any
) -> None:
    from spark_tables.hooks.spark_connect_job import connect_session

    spark, database = lake
    table = f"{database}.raced"
    results: dict[str, Any] = {}
    both_connected = threading.Barrier(2, timeout=60)

    def make(task_id: str) -> None:
        with connect_session(delta_server.url) as session:
            both_connected.wait()  # then each finds the name free: its CTAS takes seconds, the look milliseconds
            query = f"SELECT id, '{task_id}' AS by FROM range(200000)"
            results[task_id] = run_job(session, _ctas(table, query, owner=_owner(task_id)))

    racers = [threading.Thread(target=make, args=(task_id,)) for task_id in ("first", "second")]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=180)

    won = [task_id for task_id, result in results.items() if result.succeeded]
    assert len(won) == 1, {task_id: result.error for task_id, result in results.items()}
    [lost] = {"first", "second"} - set(won)
    assert results[lost].error == f"table {table} was created meanwhile by another task, whose table is left as it is"
    assert spark.sql(f"SELECT by, count(*) FROM {table} GROUP BY by").collect() == [(won[0], 200000)]
    assert _history(spark, table) == [(0, "CREATE TABLE AS SELECT")]


def test_a_ctas_job_in_session_mode_through_its_hook(
    delta_server: Any, lake: tuple[Any, str], spark_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_tables.hooks.spark_connect_job import SparkConnectJobHook

    spark, database = lake
    monkeypatch.setenv("AIRFLOW_CONN_DELTA_SERVER", json.dumps(delta_server.connection))
    job = _ctas(f"{database}.hooked", "SELECT id FROM range(12)")
    spec = JobSpec(job=job, result_uri=f"file://{spark_env}/result.json")

    result = SparkConnectJobHook(spec=spec, conn_id="delta_server", name="delta-ctas").run()

    assert result.succeeded, result.error
    assert (result.output.format, result.output.rows, result.output.committed_version) == ("delta", 12, 0)
    assert spark.table(f"{database}.hooked").count() == 12


def test_a_table_at_a_location_of_its_own_is_dropped_with_its_folder_and_a_full_folder_is_refused(
    lake: tuple[Any, str], tmp_path: Path
) -> None:
    spark, database = lake
    made, refused, owner = f"{database}.placed", f"{database}.refused", _owner("statements")
    folder, theirs = tmp_path / "placed", tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "data.csv").write_text("1\n")
    statements = [
        f"CREATE TABLE {made} USING delta LOCATION '{folder}' AS SELECT id FROM range(5)",
        "SELECT raise_error('a later statement fails')",
    ]

    failed = run_job(spark, _sql(statements, owner))
    full = run_job(spark, _ctas(refused, "SELECT 1 AS id", location=str(theirs)))

    assert failed.output.undone == [f"dropped the unfinished {made} of try 1 and its folder file:{folder}"]
    assert not folder.exists() and not spark.catalog.tableExists(made)
    assert full.error.startswith("[DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION]"), full.error
    assert [path.name for path in theirs.iterdir()] == ["data.csv"], "nothing written into another's folder"
    assert not spark.catalog.tableExists(refused)


def test_a_stopped_ctas_leaves_no_table(lake: tuple[Any, str], delta_server: Any) -> None:
    from spark_tables.hooks.spark_connect_job import connect_session

    spark, database = lake
    table = f"{database}.stopped"
    cancellation = Cancellation()
    results: list[Any] = []
    with connect_session(delta_server.url) as making:
        cancellation.interrupt_with(making.interruptAll)
        job = _ctas(table, SLEEPING_QUERY)
        runner = threading.Thread(target=lambda: results.append(run_job(making, job, cancellation)), daemon=True)
        runner.start()
        assert wait_until(lambda: bool(delta_server.running_jobs()), 60), "the CTAS's Spark job runs"
        cancellation.request("the test stops it")
        runner.join(timeout=120)

    assert not runner.is_alive()
    [result] = results
    assert result.error.startswith("cancelled: the test stops it"), result.error
    assert result.output.undone == [], "nothing was committed, so nothing is undone"
    assert not spark.catalog.tableExists(table)


def test_the_cleanup_job_of_a_lost_try_drops_its_new_table_and_restores_the_one_it_replaced(
    lake: tuple[Any, str],
) -> None:
    """A SQL job's try that died after its CTAS statements, before its last: its tables stay 'filling' until the
    cleanup job (run from outside, as after a lost worker) undoes them."""
    from spark_tables.core.ctas.job import CtasCleanupJob
    from spark_tables.jobs.ctas.lifecycle import CtasTable

    spark, database = lake
    made, replaced, owner = f"{database}.made", f"{database}.replaced", _owner("lost")
    spark.sql(f"CREATE TABLE {replaced} USING delta AS SELECT id FROM range(10)")
    for job in (
        _ctas(made, "SELECT id FROM range(5)", owner=owner),
        _ctas(replaced, "SELECT 1 AS id", owner=owner, replace=True),
    ):
        CtasTable(spark, job).make(Cancellation(), complete=False)  # as the SQL job does, which then died

    result = run_job(spark, CtasCleanupJob(tables=(made, replaced), owner=owner))

    assert result.succeeded, result.error
    assert result.output.undone == [
        f"dropped the unfinished {made} of try 1",
        f"restored version 0 of {replaced}, which the unfinished replace of try 1 replaced",
    ]
    assert not spark.catalog.tableExists(made)
    assert spark.table(replaced).count() == 10 and _marks(spark, replaced) == {}
