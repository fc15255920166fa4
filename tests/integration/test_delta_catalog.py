"""Delta Lake on a catalog that loads it (its connection's extra ``table-formats``), in both modes: a job per job
gets Delta's jars and settings with its spark-submit, and session mode's server starts with them (``delta_server``, on a
metastore of its own: the other tests' server loads no format), so a SQL job makes, merges into and
reads back a Delta table's versions on the PostgreSQL metastore. And what the table-format seam builds on, on that
server: Delta's commits and their metrics, MERGE, idempotent appends, and what Spark's own table statements refuse
of a Delta table."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.tasks.sql_reader import read_statements
from spark_tables.utils.metastore_schema import ensure_metastore_schema
from tests.conftest import SMALL_DELTA_TABLES
from tests.integration.conftest import Deployment

pytestmark = pytest.mark.integration


def _statements(table: str) -> tuple[str, ...]:
    return (
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} (id BIGINT, v STRING) USING delta",
        f"INSERT INTO {table} SELECT id, 'old' FROM range(10)",
        f"MERGE INTO {table} t USING (SELECT id, 'new' AS v FROM range(5, 15)) c ON t.id = c.id "
        "WHEN MATCHED THEN UPDATE SET v = c.v WHEN NOT MATCHED THEN INSERT *",
        f"SELECT v, count(*) AS n FROM {table} GROUP BY v ORDER BY v",
    )


def test_a_job_per_job_on_a_catalog_whose_default_format_is_delta_makes_and_merges_into_a_delta_table(
    postgres: Deployment, spark_env: Path
) -> None:
    """Its CTAS statement names no format: the catalog's default makes it a Delta table, in one commit (FLIP-218's
    marks in it); another application reads each version back."""
    from spark_tables.hooks.spark_job import SparkJobHook

    catalog = dataclasses.replace(postgres.catalog, table_formats=("delta",), default_format="delta")
    lake = dataclasses.replace(postgres, catalog=catalog)
    ensure_metastore_schema(lake.catalog)  # as the operator does before its job
    table = "delta_per_job"
    statements = (
        f"DROP TABLE IF EXISTS {table}",
        f"CREATE TABLE {table} AS SELECT id, 'old' AS v FROM range(10)",
        *_statements(table)[3:],
    )
    owner = TableOwner(dag_id="lake", run_id="manual__1", task_id="per_job")
    job = SqlJob(statements=read_statements(statements), owner=owner)
    spec = JobSpec(job=job, result_uri=f"file://{spark_env}/result.json")
    result = SparkJobHook(spec=spec, catalog=lake.catalog, conf=SMALL_DELTA_TABLES, name="delta-per-job").run()

    assert result.succeeded, result.error
    assert result.output is not None and result.output.rows == [["new", 10], ["old", 5]]
    [made] = result.output.ctas
    assert (made.format, made.atomicity, made.rows, made.version) == ("delta", "commit", 10, 0)
    versions = ", ".join(f"(SELECT count(*) FROM {table} VERSION AS OF {version})" for version in range(3))
    assert lake.read_back(f"SELECT {versions}") == [[10, 15, 15]], "made, merged into, marked complete"


def test_a_job_in_session_mode_makes_and_merges_into_a_delta_table_on_the_server(
    delta_server: Any, spark_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_tables.hooks.spark_connect_job import SparkConnectJobHook, connect_session

    monkeypatch.setenv("AIRFLOW_CONN_DELTA_SERVER", json.dumps(delta_server.connection))
    table = "delta_in_session"
    spec = JobSpec(job=SqlJob(statements=_statements(table)), result_uri=f"file://{spark_env}/result.json")
    result = SparkConnectJobHook(spec=spec, conn_id="delta_server", name="delta-in-session").run()

    assert result.succeeded, result.error
    assert result.output is not None and result.output.rows == [["new", 10], ["old", 5]]
    with connect_session(delta_server.url) as spark:
        details = {row[0]: row[1] for row in spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()}
        assert spark.sql(f"SELECT count(*) FROM {table} VERSION AS OF 1").first()[0] == 10
    assert details["Provider"] == "delta"


def _history(spark: Any, table: str) -> list[tuple[int, str, dict[str, str]]]:
    rows = spark.sql(f"DESCRIBE HISTORY {table}").orderBy("version").collect()
    return [(row["version"], row["operation"], row["operationMetrics"]) for row in rows]


def test_a_create_and_a_replace_are_one_commit_each_whose_metrics_say_what_they_wrote(lake: tuple[Any, str]):
    spark, database = lake
    table = f"{database}.made"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, id % 3 AS k FROM range(100)")
    spark.sql(f"CREATE OR REPLACE TABLE {table} USING delta AS SELECT id, id % 5 AS k FROM range(50)")

    history = _history(spark, table)

    assert [(version, operation) for version, operation, _ in history] == [
        (0, "CREATE TABLE AS SELECT"),
        (1, "CREATE OR REPLACE TABLE AS SELECT"),
    ]
    assert [metrics["numOutputRows"] for _, _, metrics in history] == ["100", "50"]
    assert all(int(metrics["numOutputBytes"]) > 0 for _, _, metrics in history)
    assert spark.sql(f"SELECT count(*) FROM {table} VERSION AS OF 0").first()[0] == 100, "the old version stays"
    assert spark.table(table).count() == 50


def test_a_merge_upserts_and_deletes_by_key(lake: tuple[Any, str]):
    spark, database = lake
    table = f"{database}.upserted"
    spark.sql(f"CREATE TABLE {table} USING delta AS SELECT id, 'old' AS v FROM range(10)")
    rows = [(1, "new", False), (2, None, True), (20, "added", False)]
    changes = spark.createDataFrame(rows, "id long, v string, d boolean")
    changes.createOrReplaceTempView("changes")

    spark.sql(
        f"MERGE INTO {table} t USING changes c ON t.id = c.id WHEN MATCHED AND c.d THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET v = c.v WHEN NOT MATCHED AND NOT c.d THEN INSERT (id, v) VALUES (c.id, c.v)"
    )

    rows = dict(spark.table(table).collect())
    assert (len(rows), rows[1], 2 in rows, rows[20], rows[3]) == (10, "new", False, "added", "old")
    _, operation, metrics = _history(spark, table)[-1]
    assert operation == "MERGE"
    counts = [metrics[f"numTargetRows{what}"] for what in ("Updated", "Deleted", "Inserted")]
    assert counts == ["1", "1", "1"]


def test_an_append_under_a_transaction_id_already_committed_is_skipped(lake: tuple[Any, str]):
    spark, database = lake
    table = f"{database}.appended"
    spark.sql(f"CREATE TABLE {table} (id BIGINT) USING delta")
    batch = spark.range(5)

    for _ in range(2):  # the second is a replay of the same micro-batch: Delta skips it
        writer = batch.write.format("delta").mode("append")
        writer.option("txnAppId", "query-1").option("txnVersion", 7).saveAsTable(table)

    assert spark.table(table).count() == 5
    assert [operation for _, operation, _ in _history(spark, table)] == ["CREATE TABLE", "WRITE"]


def test_spark_s_json_description_and_statistics_refuse_a_delta_table_and_serve_a_file_table(lake: tuple[Any, str]):
    """What the CTAS job asks of a file table (``jobs/table_format/file_tables.py``) Spark does not answer for a Delta
    table, a v2 table: a Delta table's facts come from Delta (``DESCRIBE DETAIL``, its history, its log)."""
    from pyspark.errors import AnalysisException

    spark, database = lake
    spark.sql(f"CREATE TABLE {database}.lake USING delta AS SELECT id FROM range(10)")
    spark.sql(f"CREATE TABLE {database}.files USING parquet AS SELECT id FROM range(10)")

    for statement in (
        f"DESCRIBE TABLE EXTENDED {database}.lake AS JSON",
        f"ANALYZE TABLE {database}.lake COMPUTE STATISTICS",
    ):
        with pytest.raises(AnalysisException, match=r"^\[NOT_SUPPORTED_COMMAND_FOR_V2_TABLE\]"):
            spark.sql(statement).collect()
    spark.sql(f"ANALYZE TABLE {database}.files COMPUTE STATISTICS")
    assert '"provider":"parquet"' in spark.sql(f"DESCRIBE TABLE EXTENDED {database}.files AS JSON").first()[0]
    [detail] = spark.sql(f"DESCRIBE DETAIL {database}.lake").collect()
    assert (detail["format"], detail["numFiles"] > 0, detail["sizeInBytes"] > 0) == ("delta", True, True)
