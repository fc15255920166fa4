"""Delta Lake on a catalog that loads it (its connection's extra ``table-formats``): session mode's server starts
with Delta's jars and settings (``delta_server``, on its PostgreSQL metastore, as every deployment of the tests
loads Delta), so a SQL job makes, merges into and reads back a Delta table's versions on the PostgreSQL metastore (per
job, with Delta's jars given to spark-submit, on the standalone cluster: ``test_cluster.py``). And what the
table-format seam builds on, on that server: Delta's commits and their metrics, MERGE, idempotent appends, and what
Spark's own table statements refuse of a Delta table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob

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
