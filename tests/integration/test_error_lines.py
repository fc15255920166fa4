"""A failed task's error, as the task log ends with it and the monitoring's failed-try report keeps it: one line,
reason first, naming where it came from; no spark-submit command or job spec before it, no Java stack after it."""

from __future__ import annotations

import dataclasses

import pytest

from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.hooks.spark_job import SparkJobFailed
from tests.integration.conftest import LOOKUP_DEMO_CONN, Deployment
from tests.integration.ctas_checks import run_dag, task_states, with_scenarios, xcom

pytestmark = pytest.mark.integration

#: Spark 4.2's words for a table that is not there, as it gives them after its error class (the query's position
#: follows).
NOT_FOUND = (
    "[TABLE_OR_VIEW_NOT_FOUND] The table or view `no_such_table` cannot be found. Verify the spelling and correctness "
    "of the schema and catalog. Search path: [`system`.`builtin`, `system`.`session`, `spark_catalog`.`default`]. If "
    "you did not qualify the name with a schema, verify the current_schema() output, or qualify the name with the "
    "correct schema and catalog. To tolerate the error on drop use DROP VIEW IF EXISTS or DROP TABLE IF EXISTS. "
    "SQLSTATE: 42P01"
)
#: Each task's error, exactly: the provider's words, then Spark's (4.2) where the reason is Spark's.
ERRORS = {
    "missing_table": f"statement 2/2 failed: {NOT_FOUND}; line 1 pos 14;",
    "cache_fails": f"cache broken_cache: {NOT_FOUND}; line 1 pos 29;",
    "lookup_fails": "lookup table missing_dimension (public.no_such_dimension): [JDBC_EXTERNAL_ENGINE_SYNTAX_ERROR."
    "DURING_OUTPUT_SCHEMA_RESOLUTION] JDBC external engine syntax error. The error was caused by the query SELECT * "
    'FROM (SELECT * FROM "public"."no_such_dimension" WHERE false) SPARK_GEN_SUBQ_0 WHERE 1=0. ERROR: relation '
    '"public.no_such_dimension" does not exist Position: 30. The error occurred during output schema resolution. '
    "SQLSTATE: 42000",
    "negative_ttl": "COMPILE PLAN, INSERT INTO t SELECT /*+ STATE_TTL('o' = '-1 h') */ o.shop,…: STATE_TTL('o')="
    "'-1 h' is negative: write a duration of zero or more",
    "wrong_connection": "connection 'spark_tables_lookup_demo' is of type 'postgres', not a Spark connection: give "
    "conn_id a connection of type spark (spark-submit; host = the master URL, such as local[*] or spark://host:7077) "
    "or spark_connect (a Spark Connect server: session mode)",
}
#: The tasks whose mistake Airflow sees: they fail at once, without retries (bad input), before any Spark application.
BAD_INPUT = ("negative_ttl", "wrong_connection")


@pytest.fixture(scope="module")
def failed_run(postgres: Deployment):
    deployment = with_scenarios(postgres)
    deployment = dataclasses.replace(
        deployment, env={**deployment.env, "AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO": LOOKUP_DEMO_CONN}
    )
    run = run_dag(deployment, "error_lines", "unused")
    return deployment, run


@pytest.mark.parametrize("task", sorted(ERRORS))
def test_each_failed_task_says_why_first_in_one_line_naming_where(failed_run, task: str) -> None:
    deployment, run = failed_run
    assert task_states(deployment, "error_lines", run.run_id)[task][0] == "failed"
    report = xcom(deployment, "error_lines", run.run_id, task, key=FAILED_TRY)
    assert report is not None and report["error"] == ERRORS[task], report
    final = [line for line in run.output.splitlines() if line.endswith(report["error"])]
    raised = "airflow.sdk.exceptions.AirflowFailException" if task in BAD_INPUT else SparkJobFailed.__module__
    assert final and final[-1].startswith(raised), final


def test_the_log_shows_no_command_no_spec_no_java_stack_and_one_line_about_spark_default(failed_run) -> None:
    _, run = failed_run
    assert "Cannot execute:" not in run.output and "Spark-Submit cmd" not in run.output
    assert "The above exception was the direct cause" not in run.output
    assert "\tat org.apache.spark" not in run.output and "py4j.protocol.Py4JJavaError" not in run.output
    assert "defaulting to yarn" not in run.output
    assert run.output.count("Spark connection 'spark_default' does not exist: the job runs on local[*]") == 3
    assert "XCom not found" not in run.output, "a failed try's links read no XCom it never wrote"


def test_the_two_mistakes_airflow_can_see_fail_before_any_spark_application(failed_run) -> None:
    _, run = failed_run
    for task in BAD_INPUT:
        section = run.output.split(f"starting task_id={task}", 1)[1].split("[DAG TEST] end task", 1)[0]
        assert "spark_tables INFO" not in section and "SparkContext" not in section, section[-2000:]
