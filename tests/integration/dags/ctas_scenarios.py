"""DAGs the CTAS integration tests run with ``airflow dags test``; the table name comes from the run's conf."""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from spark_tables.operators.ctas import SparkCtasOperator
from spark_tables.operators.sql import SparkSqlJobOperator

TABLE = "{{ dag_run.conf['table'] }}"


def _asleep(rows: str) -> str:
    """``rows`` rows on two tasks, each row made by a millisecond's sleep in the executor (a static Java method
    through Spark's ``reflect``): a fill whose length does not hang on the machine's speed and which leaves its CPU to
    the tests that run beside it. A cancelled task stops within a batch of rows."""
    return f"SELECT id, reflect('java.lang.Thread', 'sleep', CAST(1 AS BIGINT)) AS slept FROM range(0, {rows}, 1, 2)"


#: Far more rows than are made in a test's lifetime: a job to stop from outside.
ENDLESS = _asleep("1000000000000")
#: A fill of a few seconds, for what other processes see while it runs.
SLOW = _asleep("{{ dag_run.conf.get('rows', 6000) }}")
#: Fails at run time, after the table was created and while rows are written.
FAILING = "SELECT IF(id < 5000, id, raise_error('row ' || id || ' is bad')) AS id FROM range(0, 100000, 1, 2)"
_DAG = {"schedule": None, "start_date": pendulum.datetime(2026, 11, 1, tz="UTC"), "catchup": False}

for atomicity in ("table", "staging"):
    with DAG(dag_id=f"ctas_failing_{atomicity}", **_DAG):
        SparkCtasOperator(task_id="ctas", table=TABLE, query=FAILING, atomicity=atomicity)

with DAG(dag_id="ctas_endless", **_DAG):
    SparkCtasOperator(task_id="ctas", table=TABLE, query=ENDLESS, atomicity="table")

with DAG(dag_id="ctas_replace_endless", **_DAG):
    base = SparkCtasOperator(task_id="base", table=TABLE, query="SELECT id, 'old' AS v FROM range(100)")
    base >> SparkCtasOperator(task_id="replace", table=TABLE, query=ENDLESS, replace=True)

for atomicity in ("table", "staging"):
    with DAG(dag_id=f"ctas_slow_{atomicity}", **_DAG):
        SparkCtasOperator(task_id="ctas", table=TABLE, query=SLOW, atomicity=atomicity)

with DAG(dag_id="ctas_slow_replace", **_DAG):
    SparkCtasOperator(task_id="ctas", table=TABLE, query=SLOW, replace=True)

with DAG(dag_id="ctas_in_both_modes", **_DAG):
    # spark_session: a Spark Connect server; spark_default: the local spark-submit
    made = SparkCtasOperator(
        task_id="in_session", conn_id="spark_session", table=TABLE, query="SELECT id FROM range(100)"
    )
    made >> SparkCtasOperator(task_id="per_job", table=TABLE + "_copy", query="SELECT * FROM " + TABLE)

with DAG(dag_id="ctas_pre_existing", **_DAG):
    create = SparkCtasOperator(task_id="create", table=TABLE, query="SELECT id, 'old' AS v FROM range(100)")
    again = SparkCtasOperator(task_id="again", table=TABLE, query="SELECT 1 AS id", trigger_rule="all_done")
    if_not_exists = SparkCtasOperator(
        task_id="if_not_exists", table=TABLE, query="SELECT 1 AS id", if_not_exists=True, trigger_rule="all_done"
    )
    replace_fails = SparkCtasOperator(
        task_id="replace_fails", table=TABLE, query=FAILING, replace=True, trigger_rule="all_done"
    )
    create >> again >> if_not_exists >> replace_fails

with DAG(dag_id="ctas_retry", **_DAG):
    # the first try fails at run time after creating the table; the retry succeeds
    SparkCtasOperator(
        task_id="ctas",
        table=TABLE,
        query="SELECT IF(id < 5000 OR {{ ti.try_number }} > 1, id, raise_error('first try')) AS id FROM range(100000)",
        retries=1,
        retry_delay=timedelta(seconds=0),
    )

with DAG(dag_id="sql_ctas_failing", **_DAG):
    # a SQL job's CTAS statements made two tables, one filled further, before its last statement failed
    SparkSqlJobOperator(
        task_id="sql",
        sql=[
            f"CREATE TABLE {TABLE} USING parquet AS SELECT id, 'first' AS v FROM range(1000)",
            f"CREATE TABLE {TABLE}_totals AS SELECT v, count(*) AS n FROM {TABLE} GROUP BY v",
            f"INSERT INTO {TABLE} SELECT id, 'second' AS v FROM ({FAILING})",
        ],
    )

with DAG(dag_id="ctas_quick", **_DAG):
    SparkCtasOperator(task_id="ctas", table=TABLE, query="SELECT 1 AS id")

#: Each mode's execution_timeout: long enough for the job to have made its table on a busy machine, per job with its
#: spark-submit's JVM and session start, in session mode with a session on a server already running.
TIMEOUTS = {"per_job": timedelta(seconds=60), "in_session": timedelta(seconds=25)}
for mode, timeout in TIMEOUTS.items():
    with DAG(dag_id=f"ctas_timeout_{mode}", **_DAG):
        # execution_timeout fires while the job fills the table: the job must stop and drop it before the task ends
        SparkCtasOperator(task_id="ctas", table=TABLE, query=ENDLESS, atomicity="table", execution_timeout=timeout)
