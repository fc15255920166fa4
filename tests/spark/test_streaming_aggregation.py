"""Spark's own streaming aggregation into PostgreSQL, with and without FLIP-365's buffer, on the shared session:
the same final table as Spark's batch aggregation of the same rows, fewer records when buffered, aggregates that
are not idempotent refused before any query, and a flush's records at or below the watermark written first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.aggregation.idempotent import SPARK_IDEMPOTENT_AGGREGATES
from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.jobs.aggregation.runner import (
    aggregation_confs,
    aggregation_query,
    check_idempotent,
    run_streaming_aggregation,
)
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.session_conf import session_conf
from spark_tables.jobs.streaming.clock import FixedClock
from tests.spark.page_views import PG_SCHEMA, T0, TWO_RUNS, add_views, lose_commit, pg_sink, pg_table, rounded
from tests.spark.postgres import PG, run_sql

pytestmark = pytest.mark.spark

#: Most of FLIP-365's idempotent aggregates whose result does not depend on the order rows arrive in.
PAGE_STATS = """
    SELECT page, count(*) AS views, size(collect_set(user)) AS users, sum(ms) AS total_ms, avg(ms) AS mean_ms,
           min(ms) AS fastest_ms, max(ms) AS slowest_ms, max_by(user, ms) AS slowest_user,
           stddev_pop(ms) AS spread_ms, var_samp(ms) AS variance_ms,
           array_join(array_sort(collect_set(user)), ',') AS user_list
    FROM {source} GROUP BY page
"""
STATS_COLUMNS = (
    "page text PRIMARY KEY, views bigint, users bigint, total_ms bigint, mean_ms double precision, "
    "fastest_ms bigint, slowest_ms bigint, slowest_user text, spread_ms double precision, "
    "variance_ms double precision, user_list text"
)


def _run(
    spark: SparkSession,
    query: str,
    sink: PostgresUpsertSink,
    checkpoint: Path | str,
    at_ms: int = T0,
    **configuration: str,
) -> dict[str, Any]:
    job = StreamingAggregationJob(
        query=query,
        sink=sink,
        checkpoint=str(checkpoint),
        options=StreamingOptions(configuration=configuration, connections={sink.name: dict(PG)}),
    )
    return run_streaming_aggregation(spark, job, Cancellation(), FixedClock(at_ms)).query


@pytest.mark.parametrize("store", ["log", "state-store"])
def test_buffered_and_unbuffered_tables_equal_sparks_own_aggregation(
    spark: SparkSession, views: Path, tmp_path: Path, store: str
) -> None:
    """The durable buffer in either store (the log, by default in front of PostgreSQL, or the state store)."""
    plain, buffered = pg_sink("plain_stats", STATS_COLUMNS), pg_sink("buffered_stats", STATS_COLUMNS)
    buffering = {"execution.flush.max-interval": "1 h", "execution.flush.durable-store": store}
    query = PAGE_STATS.format(source="STREAM(views)")
    reports = []
    for step, files in enumerate(TWO_RUNS):
        for name, rows in files:
            add_views(views, name, *rows)
        at = T0 + step * 1000
        reports.append(
            (
                _run(spark, query, plain, tmp_path / "plain", at),
                # as a URI, as jobs get it: the flush requests' rows are still told from the data's
                _run(spark, query, buffered, f"file://{tmp_path}/buffered", at, **buffering),
            )
        )
        spark.catalog.refreshTable("views")
        expected = sorted(map(rounded, spark.sql(PAGE_STATS.format(source="views")).collect()))
        assert pg_table("plain_stats") == expected
        assert pg_table("buffered_stats") == expected

    (plain_1, buffered_1), (plain_2, buffered_2) = reports
    # Three micro-batches change home three times and docs twice; the buffer writes each page's last result once.
    assert (plain_1["batches"], plain_1["rows_upserted"], plain_1["write_calls"]) == (3, 5, 3)
    assert buffered_1["buffer"] == {
        "store": store,
        "records_in": 6,
        "records_emitted": 2,
        "flushes": {"interval": 0, "idle": 0, "end": 1},
    }
    assert (buffered_1["rows_upserted"], buffered_1["write_calls"]) == (2, 1)
    assert plain_2["rows_upserted"] == buffered_2["rows_upserted"] == 2
    assert "buffer" not in plain_1


def test_every_aggregate_on_flip_365s_list_is_accepted(spark: SparkSession) -> None:
    calls = ", ".join(
        f"{name}(ms, ms)" if name in ("min_by", "max_by") else f"{name}(CAST(ms AS STRING))"
        if name in ("listagg", "string_agg") else f"{name}(ms)"
        for name in sorted(SPARK_IDEMPOTENT_AGGREGATES)
    )  # fmt: skip
    check_idempotent(spark, f"SELECT page, {calls}, count(DISTINCT user) FROM STREAM(views) GROUP BY page")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        (
            "SELECT page, percentile_approx(ms, 0.5) AS p50 FROM STREAM(views) GROUP BY page",
            "streaming aggregation: aggregate percentile_approx is not idempotent (FLIP-365 buffers count, sum, avg, "
            "min, max, min_by, max_by, first_value, last_value, listagg, stddev/variance (pop and samp), "
            "collect_list, collect_set and DISTINCT): compute it another way, or run without "
            "execution.flush.max-interval",
        ),
        (
            "SELECT page, ms AS views FROM STREAM(views)",
            "streaming aggregation: execution.flush.max-interval buffers an aggregation's results, but the query has "
            "no GROUP BY (or DISTINCT), so each of its rows counts: aggregate it, or run without "
            "execution.flush.max-interval",
        ),
    ],
)
def test_buffering_what_is_not_idempotent_is_refused_before_any_query(
    spark: SparkSession, views: Path, tmp_path: Path, query: str, error: str
) -> None:
    sink = pg_sink("p50", "page text PRIMARY KEY, views bigint")
    add_views(views, "a", ("home", "u1", 120, "2026-01-01 00:00:01"))
    with pytest.raises(SpecError) as raised:
        _run(spark, query, sink, tmp_path / "checkpoint", **{"execution.flush.max-interval": "1 min"})
    assert str(raised.value) == error
    assert not spark.streams.active and not (tmp_path / "checkpoint").exists()
    assert pg_table("p50") == []


@pytest.mark.parametrize(
    "buffering",
    [
        {"execution.flush.durable-store": "log"},
        {"execution.flush.durable-store": "state-store"},
        {"execution.flush.memory-buffer-only": "true"},
    ],
    ids=["log", "state-store", "memory"],
)
def test_a_flush_writes_the_records_at_or_below_the_watermark_first(
    spark: SparkSession, views: Path, tmp_path: Path, buffering: dict[str, str]
) -> None:
    """Views per page and minute; the end flush comes after the views, when the watermark (the latest view less
    10 s: 00:01:20) has passed the first minute's end but not the second's; the buffer in the log, the state store
    or in memory."""
    sink = pg_sink(
        "minutes",
        "page text, minute_start timestamp, minute_end timestamp, views bigint, PRIMARY KEY (page, minute_start)",
        key=("page", "minute_start"),
    )
    run_sql(
        f"CREATE TABLE {PG_SCHEMA}.written (seq bigserial, page text, minute_end timestamp)",
        f"""CREATE FUNCTION {PG_SCHEMA}.log_write() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN INSERT INTO {PG_SCHEMA}.written (page, minute_end) VALUES (NEW.page, NEW.minute_end); RETURN NEW;
            END $$""",
        f"CREATE TRIGGER log_write AFTER INSERT OR UPDATE ON {PG_SCHEMA}.minutes FOR EACH ROW "
        f"EXECUTE FUNCTION {PG_SCHEMA}.log_write()",
    )
    pages = [f"page_{n}" for n in range(8)]
    add_views(
        views,
        "a",
        *((page, "u1", 1, "2026-01-01 00:01:30") for page in pages),
        *((page, "u1", 1, "2026-01-01 00:00:05") for page in pages),
    )
    query = """
        SELECT page, window(ts, '1 minute') AS minute, count(*) AS views
        FROM STREAM(views) WATERMARK ts DELAY OF INTERVAL 10 SECONDS
        GROUP BY page, window(ts, '1 minute')
    """
    configuration = {"execution.flush.max-interval": "1 h", **buffering}
    done = _run(spark, query, sink, tmp_path / "checkpoint", **configuration)

    assert done["buffer"]["records_emitted"] == 16
    ends = [
        minute_end.minute
        for _seq, minute_end in run_sql(f"SELECT seq, minute_end FROM {PG_SCHEMA}.written ORDER BY seq")
    ]
    assert ends == [1] * 8 + [2] * 8
    assert len(pg_table("minutes")) == 16


@pytest.mark.parametrize(
    ("store", "counts"),
    [
        # the log's three pages go out at the restart's first batch (their interval is over), then the end flush
        ("log", {"batches": 2, "records_emitted": 6, "write_calls": 2, "flushes": (1, 0, 1)}),
        # batch 1 again, then c, then the end flush's batch: each of the three pages written once
        ("state-store", {"batches": 3, "records_emitted": 3, "write_calls": 1, "flushes": (0, 0, 1)}),
    ],
)
def test_a_restart_from_the_checkpoint_between_flushes_loses_nothing(
    spark: SparkSession, views: Path, tmp_path: Path, store: str, counts: dict[str, Any]
) -> None:
    """A run stops after two micro-batches, before any flush (its driver never reaches its exit path, as when
    killed), and the second one's commit is lost (as when a driver dies between its sink and its commit): the
    restart runs that batch again from the checkpoint, reads one more file, and every page ends equal to Spark's
    batch aggregation of all three."""
    sink = pg_sink("restarted", STATS_COLUMNS)
    query = PAGE_STATS.format(source="STREAM(views)")
    buffering = {"execution.flush.max-interval": "1 h", "execution.flush.durable-store": store}
    add_views(views, "a", ("home", "u1", 120, "2026-01-01 00:00:01"), ("docs", "u2", 300, "2026-01-01 00:00:02"))
    add_views(views, "b", ("home", "u2", 80, "2026-01-01 00:00:03"), ("blog", "u3", 95, "2026-01-01 00:00:04"))
    checkpoint = tmp_path / "checkpoint"
    job = StreamingAggregationJob(
        query=query,
        sink=sink,
        checkpoint=str(checkpoint),
        options=StreamingOptions(configuration=buffering, connections={sink.name: dict(PG)}),
    )
    with session_conf(spark, aggregation_confs(spark, job)):
        stopped = aggregation_query(spark, job, FixedClock(T0))
        stopped.start(True).awaitTermination()
    assert sorted(path.name for path in (checkpoint / "commits").iterdir() if path.name.isdigit()) == ["0", "1"]
    assert pg_table("restarted") == []  # everything is buffered
    if store == "log":
        log = tmp_path / "checkpoint-buffer-log"
        assert sorted(path.name for path in log.iterdir()) == [f"{batch:020d}.arrow" for batch in (0, 1)]
    lose_commit(checkpoint, 1)

    add_views(views, "c", ("docs", "u4", 60, "2026-01-01 00:00:05"))
    done = _run(spark, query, sink, checkpoint, T0 + 1000, **buffering)

    spark.catalog.refreshTable("views")
    assert pg_table("restarted") == sorted(map(rounded, spark.sql(PAGE_STATS.format(source="views")).collect()))
    flushes = done["buffer"]["flushes"]
    assert {
        "batches": done["batches"],
        "records_emitted": done["buffer"]["records_emitted"],
        "write_calls": done["write_calls"],
        "flushes": (flushes["interval"], flushes["idle"], flushes["end"]),
    } == counts
    assert not (tmp_path / "checkpoint-buffer-log").exists()  # nothing left buffered
