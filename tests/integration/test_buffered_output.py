"""Buffered output through `airflow dags test` on the embedded default: the example DAG adds page views and runs one
streaming aggregation three ways (unbuffered, buffered in the state store, buffered in memory) into PostgreSQL, and
buffered into a Delta Lake table of the catalog and a compacted topic of the tests' Kafka broker, with real
spark-submit jobs."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import pytest

from tests.integration import as_deployed
from tests.integration.conftest import Deployment, ExampleRun, dags_test, demo_connection
from tests.integration.test_plan import DATABASE, _pg
from tests.kafka import broker, messages

pytestmark = pytest.mark.integration

DAG_ID = "example_spark_buffered_output"
WAYS = ("unbuffered", "buffered", "memory_buffered")
#: The example's topic, on the tests' one broker: the runs of other test files send to it too, for other days.
TOPIC = "spark_tables_demo.page_views_per_slot"
#: The day this file's run is for (the cluster's run is for another: its messages have other keys).
DAY = "2026-01-02"


def _expected_views() -> list[tuple[str, int, int, int]]:
    """(page, 2-minute window from the first, views, visitors) of the DAG's 2,000 views, as its INSERT makes them."""
    views: dict[tuple[str, int], list[int]] = defaultdict(list)
    for n in range(2000):
        page = f"page_{(n % 400) ** 2 // 8000}"
        views[(page, n * 600 // 2000 // 120)].append(n * 7 % 300)
    return sorted((page, slot, len(visitors), len(set(visitors))) for (page, slot), visitors in views.items())


def _table(way: str, database: str) -> list[tuple[str, int, int, int]]:
    rows = _pg(f"SELECT page, slot_start, slot_end, views, visitors FROM spark_tables_demo.page_views_{way}", database)
    first = min(start for _page, start, _end, _views, _visitors in rows)
    assert all(end - start == timedelta(minutes=2) for _page, start, end, _views, _visitors in rows)
    return sorted(
        (page, (start - first) // timedelta(minutes=2), views, visitors) for page, start, _, views, visitors in rows
    )


def test_the_example_writes_the_same_tables_three_ways_with_fewer_writes_when_buffered(embedded: Deployment) -> None:
    deployment = dataclasses.replace(embedded, env={**embedded.env, **buffered_demo_env(DATABASE)})
    prepare_example_buffered_output(DATABASE)
    conf = json.dumps(EXAMPLE_CONF)
    check_example_buffered_output(dags_test(deployment, DAG_ID, DAY, "--conf", conf), DATABASE, DAY)


#: The example's run conf: an interval that no run crosses, so its flushes do not depend on how long it takes.
EXAMPLE_CONF = {"flush_max_interval": "3650 d"}


def buffered_demo_env(database: str) -> dict[str, str]:
    """The example's connections, as its environment gives them: PostgreSQL on ``database``, the tests' broker."""
    return {
        "AIRFLOW_CONN_SPARK_TABLES_BUFFERED_DEMO": demo_connection(database),
        "AIRFLOW_CONN_SPARK_TABLES_BUFFERED_KAFKA": as_deployed.kafka_connection(servers=broker()),
    }


def prepare_example_buffered_output(database: str) -> None:
    """Before a run of the example: no tables of an earlier one in ``database``."""
    _pg("DROP TABLE IF EXISTS " + ", ".join(f"spark_tables_demo.page_views_{way}" for way in WAYS), database)


def _topic_messages(day: str) -> list[tuple[str, int, int, int]]:
    """The example topic's messages whose key is a window of ``day``, as (page, window from the first, views,
    visitors), in the order sent; their key is their value's page and window start."""
    sent = []
    for key, value in messages(TOPIC):
        start = datetime.fromisoformat(key["slot_start"]).astimezone(UTC)
        if start.date() == date.fromisoformat(day):
            assert key == {"page": value["page"], "slot_start": value["slot_start"]}
            end = datetime.fromisoformat(value["slot_end"]).astimezone(UTC)
            assert end - start == timedelta(minutes=2)
            sent.append((value["page"], start, value["views"], value["visitors"]))
    first = min(start for _page, start, _views, _visitors in sent)
    return [(page, (start - first) // timedelta(minutes=2), views, visitors) for page, start, views, visitors in sent]


def check_example_buffered_output(run: ExampleRun, database: str, day: str) -> None:
    """What the example's run for ``day`` (with :data:`EXAMPLE_CONF`) did, its tables in ``database``."""
    expected = _expected_views()
    assert len(expected) == 100  # 20 pages x 5 windows
    for way in WAYS:
        assert _table(way, database) == expected, way

    x = run.xcoms
    unbuffered, buffered, memory = (x[f"views_{way}"]["query"] for way in WAYS)
    # 8 files read one a micro-batch, each with views of most results; both buffers flush at the end from the driver.
    assert [query["batches"] for query in (unbuffered, buffered, memory)] == [8, 8, 8]
    assert unbuffered["input_rows"] == memory["input_rows"] == 2000
    assert unbuffered["write_calls"] == 8 and unbuffered["rows_upserted"] > 400
    assert "buffer" not in unbuffered
    assert buffered["buffer"] == {
        "store": "log",
        "records_in": 2000,
        "records_emitted": 100,
        "flushes": {"interval": 0, "idle": 0, "end": 1},
    }
    assert (buffered["rows_upserted"], buffered["write_calls"]) == (100, 1)
    assert memory["buffer"] == {
        "store": "memory",
        "records_in": 2000,
        "records_emitted": 100,
        "flushes": {"interval": 0, "idle": 0, "end": 1, "full": 0},
    }
    assert (memory["rows_upserted"], memory["write_calls"]) == (100, 1)
    assert [op["operator"] for op in memory["state_operators"]] == ["stateStoreSave"]
    delta = x["views_buffered_delta"]["query"]
    # into Delta, what the buffer saves is commits and files: one MERGE for the 8 micro-batches; a catalog table's
    # buffer is in the state store, which flushes at the end in a batch of its own
    assert (delta["batches"], delta["rows_upserted"], delta["write_calls"]) == (9, 100, 1)
    assert delta["buffer"]["store"] == "state-store"
    assert delta["files_written"] >= 1 and delta["buffer"]["records_emitted"] == 100
    rows = run.deployment.read_back(
        "SELECT page, CAST((unix_timestamp(slot_start) - min(unix_timestamp(slot_start)) OVER ()) DIV 120 AS INT), "
        "views, visitors, CAST(unix_timestamp(slot_end) - unix_timestamp(slot_start) AS INT) "
        "FROM buffered_demo.page_views_per_slot"
    )
    assert {row[4] for row in rows} == {120}, "2-minute windows"
    assert sorted(tuple(row[:4]) for row in rows) == expected, "the Delta table equals PostgreSQL's"
    kafka = x["views_buffered_kafka"]["query"]
    # into a topic, a flush sends one message a key: the 100 results once each, where unbuffered would send 400+
    assert (kafka["batches"], kafka["messages_sent"], kafka["write_calls"]) == (9, 100, 1)
    assert (kafka["buffer"]["store"], kafka["buffer"]["records_in"]) == ("state-store", 2000)
    sent = _topic_messages(day)
    assert sorted(sent) == expected, "one message a key, each the tables' row"
    assert "sink page_views_buffered: 2016 record(s) in" not in run.log
    assert "sink page_views_buffered: 2000 record(s) in, 100 emitted, 1 write call(s)" in run.log
