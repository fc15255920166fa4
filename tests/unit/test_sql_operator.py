from __future__ import annotations

from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import result_uri
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.operators.sql import SparkSqlJobOperator
from spark_tables.utils import settings

pytestmark = pytest.mark.usefixtures("spark_tables_home")


def _context(**ti_fields):
    """The context of try 1 of ``load``; what it pushes to XCom lands in ``ti.pushed``, by key."""
    ti = {"dag_id": "sales", "run_id": "manual__2026-01-01T00:00:00+00:00", "task_id": "load", "map_index": -1}
    ti.update({"try_number": 1, "pushed": {}, "stats_tags": {}, **ti_fields})
    ti["xcom_push"] = lambda key, value: ti["pushed"].__setitem__(key, value)
    return {"ti": SimpleNamespace(**ti)}


def _texts(job):
    return tuple(statement.text for statement in job.statements)


class TestBuildJob:
    def test_a_script_is_split_on_semicolons(self):
        operator = SparkSqlJobOperator(
            task_id="t", sql="CREATE TABLE t (a INT);\nINSERT INTO t VALUES (1);\nSELECT * FROM t;"
        )

        job = operator.build_job(_context())

        assert _texts(job) == ("CREATE TABLE t (a INT)", "INSERT INTO t VALUES (1)", "SELECT * FROM t")

    def test_a_semicolon_inside_a_string_literal_does_not_split(self):
        operator = SparkSqlJobOperator(task_id="t", sql="SELECT 'a;b' AS v; SELECT 2")

        assert _texts(operator.build_job(_context())) == ("SELECT 'a;b' AS v", "SELECT 2")

    def test_a_list_passes_through_unchanged(self):
        statements = ["CREATE TABLE t (a INT);", "  SELECT 1  "]

        job = SparkSqlJobOperator(task_id="t", sql=statements).build_job(_context())

        assert _texts(job) == tuple(statements)

    def test_count_rows_is_passed_to_the_job(self):
        assert SparkSqlJobOperator(task_id="t", sql="SELECT 1").build_job(_context()).count_rows is True
        job = SparkSqlJobOperator(task_id="t", sql="SELECT 1", count_rows=False).build_job(_context())
        assert job.count_rows is False

    def test_max_result_rows_is_passed_to_the_job(self):
        job = SparkSqlJobOperator(task_id="t", sql="SELECT 1", max_result_rows=7).build_job(_context())

        assert job.max_result_rows == 7

    def test_an_invalid_written_table_name_is_rejected(self):
        operator = SparkSqlJobOperator(task_id="t", sql=["SELECT 1", "INSERT INTO my-table SELECT 1"])

        with pytest.raises(SpecError, match="invalid table identifier 'my-table'"):
            operator.build_job(_context())

    @pytest.mark.parametrize("sql", ["", "  \n", "-- nothing here"])
    def test_a_script_without_statements_is_rejected(self, sql):
        with pytest.raises(SpecError, match="no statements"):
            SparkSqlJobOperator(task_id="t", sql=sql).build_job(_context())

    @pytest.mark.parametrize("sql", [5, None, {"q": "SELECT 1"}])
    def test_sql_of_another_type_is_rejected(self, sql):
        with pytest.raises(SpecError, match="sql must be a string or a list"):
            SparkSqlJobOperator(task_id="t", sql=sql).build_job(_context())

    def test_sql_is_templated_and_reads_sql_files(self):
        assert "sql" in SparkSqlJobOperator.template_fields
        assert ".sql" in SparkSqlJobOperator.template_ext


class TestPrepare:
    def test_the_hook_writes_the_result_of_this_try_under_the_exchange(self, spark_tables_home):
        operator, context = SparkSqlJobOperator(task_id="load", sql="SELECT 1"), _context(try_number=3, map_index=2)
        hook = operator.hook_for(context, operator.build_job(context))

        assert hook._spec.result_uri == result_uri(
            settings.exchange_uri(),
            dag_id="sales",
            run_id="manual__2026-01-01T00:00:00+00:00",
            task_id="load",
            map_index=2,
            try_number=3,
        )
        assert hook._spec.result_uri.startswith(f"file://{spark_tables_home}/exchange/")

    def test_the_application_is_named_after_dag_and_task_by_default(self):
        operator, context = SparkSqlJobOperator(task_id="load", sql="SELECT 1"), _context()
        hook = operator.hook_for(context, operator.build_job(context))

        assert hook.app_name == "sales.load"


class TestExecute:
    @pytest.mark.usefixtures("nothing_is_started")
    @pytest.mark.parametrize(
        ("arguments", "named"),
        [
            ({"conn_id": "spark_nowhere"}, "Spark connection 'spark_nowhere' does not exist"),
            ({"catalog_conn_id": "catalog_nowhere"}, "catalog connection 'catalog_nowhere' does not exist"),
            ({"deploy_mode": "sideways"}, "deploy-mode 'sideways' is invalid"),
            ({"sql": "INSERT INTO my-table SELECT 1"}, "invalid table identifier 'my-table'"),
            ({"sql": ["SELECT 1", "-- nothing"]}, "statement 2 is empty"),
        ],
    )
    def test_bad_input_fails_the_task_without_retry_on_one_line(self, arguments, named):
        operator = SparkSqlJobOperator(task_id="load", **{"sql": "SELECT 1", **arguments})
        context = _context()

        with pytest.raises(AirflowFailException) as caught:
            operator.execute(context)

        message = str(caught.value)
        assert named in message
        assert "\n" not in message
        assert caught.value.__cause__ is None
        # failed before Spark started, the try leaves its report for the monitoring pages all the same
        assert context["ti"].pushed[FAILED_TRY] == {"try_number": 1, "error": message, "cleanup": None}

    @pytest.mark.usefixtures("nothing_is_started")
    def test_a_bad_spark_connection_fails_before_the_metastore_schema_is_touched(self, set_connection, monkeypatch):
        set_connection(
            "spark_tables_default",
            conn_type="spark_tables",
            host="127.0.0.1",
            schema="hms",
            extra={"warehouse": "/tmp/wh"},
        )
        created = []
        monkeypatch.setattr("spark_tables.operators.spark_job.ensure_metastore_schema", created.append)
        operator = SparkSqlJobOperator(task_id="load", sql="SELECT 1", conn_id="spark_nowhere")

        with pytest.raises(AirflowFailException, match="Spark connection 'spark_nowhere' does not exist"):
            operator.execute(_context())
        assert created == []
