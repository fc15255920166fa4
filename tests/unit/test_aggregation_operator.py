"""The Airflow side of streaming aggregations: the job the operator builds (the sink's connection resolved, the
flush parameters as FLIP-365's options, a default checkpoint per task), bad input failing before any job, the log
line of the buffer, and the query's function calls read from its tokens."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from spark_tables.core.aggregation.idempotent import refuse_non_idempotent
from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.streaming.sinks import PostgresUpsertSink, TableUpsertSink
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.aggregation.query_tokens import called_names, groups_rows
from spark_tables.operators.aggregation import SparkStreamingAggregationOperator, default_checkpoint
from tests.unit.task_context import task_context

pytestmark = pytest.mark.usefixtures("spark_tables_home")

SINK = PostgresUpsertSink(name="page_counts", conn_id="serving", table="public.page_counts", key=("page",))
QUERY = "SELECT page, count(*) AS views FROM STREAM(page_views) GROUP BY page"


def test_the_job_has_the_sinks_connection_the_flush_options_and_a_checkpoint_per_task(serving: None) -> None:
    operator = SparkStreamingAggregationOperator(
        task_id="counts", sql=QUERY, sink=SINK, flush_max_interval=timedelta(minutes=2), run_for="10 min"
    )
    job = operator.build_job(task_context())
    assert job.options.connections == {
        "page_counts": {
            "connect_timeout": 10,
            "host": "db",
            "port": 6432,
            "dbname": "srv",
            "user": "w",
            "password": "pw",
        }
    }
    assert job.options.configuration == {"execution.flush.max-interval": "120000 ms"}
    assert (job.options.flush.max_interval, job.options.run_for_ms) == (timedelta(minutes=2), 600_000)
    assert job.checkpoint == default_checkpoint(task_context()["ti"])
    assert "/checkpoints/aggregations/d__t__-1__" in job.checkpoint
    spec = JobSpec(job=job, result_uri="file:///r.json")
    assert spec.carries_credentials  # so the spec travels in a file, never on a command line
    assert JobSpec.from_json(spec.to_json()).job == job


def test_no_two_task_instances_share_a_default_checkpoint() -> None:
    """Dots in DAG and task ids (a task group's ``g.t``) and mapped instances never meet in one folder."""
    instances = [
        SimpleNamespace(dag_id="a.b", task_id="c", map_index=-1),
        SimpleNamespace(dag_id="a", task_id="b.c", map_index=-1),
        SimpleNamespace(dag_id="a", task_id="b.c", map_index=0),
        SimpleNamespace(dag_id="a", task_id="b.c", map_index=1),
        SimpleNamespace(dag_id="a", task_id="b_c", map_index=-1),
    ]
    checkpoints = {default_checkpoint(ti) for ti in instances}
    assert len(checkpoints) == len(instances)


def test_the_checkpoint_is_shared_with_the_executors_named_by_what_set_it(serving: None) -> None:
    default = SparkStreamingAggregationOperator(task_id="counts", sql=QUERY, sink=SINK)
    own = SparkStreamingAggregationOperator(task_id="counts", sql=QUERY, sink=SINK, checkpoint="file:///c/counts")

    job = default.build_job(task_context())
    assert default.shared_folders(job, ()) == {"[spark_tables] checkpoint_uri": job.checkpoint}
    assert own.shared_folders(own.build_job(task_context()), ()) == {"checkpoint": "file:///c/counts"}


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"flush_max_interval": "soon"}, "execution.flush.max-interval"),
        ({"cache_max_entries": 10}, "state.backend.cache.max-entries-num applies to buffered output"),
        ({"sql": " ; "}, "streaming aggregation: query is empty"),
    ],
)
def test_bad_input_fails_the_task_before_any_job(
    nothing_is_started: None, tmp_path: Path, parameters: dict[str, Any], message: str
) -> None:
    operator = SparkStreamingAggregationOperator(task_id="t", **{"sql": QUERY, "sink": SINK, **parameters})
    with pytest.raises(AirflowFailException, match=re.escape(message)):
        operator.execute(task_context())


def test_a_sink_that_is_not_an_upsert_sink_is_refused_at_once() -> None:
    refused = "sink must be a PostgresUpsertSink, a TableUpsertSink or a KafkaUpsertSink, not str"
    with pytest.raises(TypeError, match=refused):
        SparkStreamingAggregationOperator(task_id="t", sql=QUERY, sink="page_counts")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="streaming aggregation: checkpoint is empty"):
        StreamingAggregationJob(query=QUERY, sink=SINK, checkpoint=" ")


def test_the_task_log_says_what_the_buffer_did(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(SparkStreamingAggregationOperator, "log", logging.getLogger("aggregation_test"))
    buffer = {
        "store": "log",
        "records_in": 120000,
        "records_emitted": 6552,
        "flushes": {"interval": 13, "idle": 1, "end": 0},
    }
    result = JobResult(
        kind="streaming_aggregation", output={"query": {"sink": "page_counts", "write_calls": 14, "buffer": buffer}}
    )
    with caplog.at_level(logging.INFO, logger="aggregation_test"):
        SparkStreamingAggregationOperator(task_id="t", sql=QUERY, sink=SINK).xcom_value(result)
    assert [r.getMessage() for r in caplog.records] == [
        "sink page_counts: 120000 record(s) in, 6552 emitted, 14 write call(s); flushes: interval 13, idle 1, end 0; "
        "buffered in the log"
    ]


def test_function_calls_are_read_from_tokens_leaving_strings_and_comments_out() -> None:
    query = """SELECT page, count(DISTINCT user) AS n, FIRST(v) AS f, LEFT(page, 2) AS l, 'mode(x)' AS s
               FROM STREAM(views) WATERMARK ts DELAY OF INTERVAL 10 SECONDS -- percentile(ms)
               GROUP BY page, window(ts, '1 minute')"""
    assert called_names(query) == ["count", "first", "left", "stream", "window"]
    assert groups_rows(query) and groups_rows("SELECT DISTINCT page FROM STREAM(views)")
    assert not groups_rows("SELECT page FROM STREAM(views)")


def test_an_aggregate_off_flip_365s_list_is_named() -> None:
    refuse_non_idempotent(["COUNT", "max_by", "collect_set", "string_agg"], "q")
    with pytest.raises(SpecError, match=r"^q: aggregate mode is not idempotent \(FLIP-365 buffers count, "):
        refuse_non_idempotent(["sum", "MODE"], "q")


def test_a_catalog_table_sink_needs_no_connection_and_travels_in_the_spec(tmp_path: Path) -> None:
    sink = TableUpsertSink(name="serving.page_counts", key=("page",))
    operator = SparkStreamingAggregationOperator(task_id="t", sql=QUERY, sink=sink, flush_max_interval="2 min")
    job = operator.build_job(task_context())
    assert job.options.connections == {}
    spec = JobSpec.from_json(JobSpec(job=job, result_uri="file:///r.json").to_json())
    assert spec.job.sink == sink and spec.job.sink.to_dict() == {
        "name": "serving.page_counts",
        "kind": "table-upsert",
        "key": ["page"],
    }
    with pytest.raises(SpecError, match=r"^catalog sink serving\.page_counts: key: give at least one column$"):
        TableUpsertSink(name="serving.page_counts", key=())


def test_a_kafka_source_ships_the_connector_and_its_missing_connection_fails_before_any_job(
    nothing_is_started: None, serving: None
) -> None:
    operator = SparkStreamingAggregationOperator(
        task_id="counts",
        sql="SELECT page, count(*) AS views FROM page_views GROUP BY page",
        sink=SINK,
        sources=KafkaTopicSource("page_views", "site.views", "page STRING, user STRING"),
    )
    assert any(jar.endswith("kafka-clients.jar") for jar in operator.connector_jars(None))
    with pytest.raises(
        AirflowFailException, match="kafka source page_views: connection 'kafka_default' does not exist"
    ):
        operator.execute(task_context())
    assert SparkStreamingAggregationOperator(task_id="c", sql=QUERY, sink=SINK).connector_jars(None) == []
