"""A compiled plan reading a Kafka topic, a buffered streaming aggregation writing one and a lookup join enriching
one, through ``airflow dags test``, per job on the embedded default and on the standalone cluster, and in session
mode: the tasks look the topics up, their jobs get Spark's Kafka connector, each run reads the messages sent since
the last from its checkpoint, exactly once into PostgreSQL, the aggregation sends each shop's latest count to a
compacted topic, a message a shop a run, and the lookup join enriches each message once."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from tests.integration import as_deployed
from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, SCENARIOS, Deployment, dags_test, demo_connection
from tests.kafka import broker, messages, new_topic, send

pytestmark = pytest.mark.integration

DATABASE = "spark_tables_test"


def _pg(query: str) -> list[tuple]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=DATABASE, user=PG_USER, autocommit=True) as db:
        cursor = db.execute(query)
        return cursor.fetchall() if cursor.description else []


@pytest.mark.parametrize("name", ["embedded", "in_session"])
def test_a_plan_reads_the_messages_of_a_topic_once_in_each_mode(name: str, request: pytest.FixtureRequest) -> None:
    """Per job, the connector on the spark-submit's jars; in session mode, on the Connect server's class path (the
    standalone cluster's run: tests/integration/test_cluster.py)."""
    check_kafka_scenario(request.getfixturevalue(name), "session" if name == "in_session" else "per-job")


def check_kafka_scenario(base: Deployment, mode: str) -> None:
    """Two runs of ``kafka_plan_scenario`` on ``base``, whose tasks run in ``mode``, with messages sent before each."""
    topic, counts = new_topic("orders"), new_topic("shop-counts", compacted=True)
    _pg("DROP SCHEMA IF EXISTS kafka_scenario CASCADE")
    _pg("CREATE SCHEMA kafka_scenario")
    _pg("CREATE TABLE kafka_scenario.big_orders (order_id bigint PRIMARY KEY, shop text, amount int)")
    _pg("CREATE TABLE kafka_scenario.shops (shop text, region text)")
    _pg("INSERT INTO kafka_scenario.shops VALUES ('shop_0', 'north'), ('shop_1', 'south')")
    env = {
        "AIRFLOW_CONN_KAFKA_DEFAULT": as_deployed.kafka_connection(servers=broker()),
        "AIRFLOW_CONN_SPARK_TABLES_KAFKA_DEMO": demo_connection(DATABASE),
        "SPARK_TABLES_TEST_KAFKA_TOPIC": topic,
        "SPARK_TABLES_TEST_KAFKA_PLAN": str(base.home / "plans" / f"{topic}.json"),
        "SPARK_TABLES_TEST_KAFKA_COUNTS": counts,
        "SPARK_TABLES_TEST_KAFKA_CHECKPOINT": str(base.home / "checkpoints" / counts),
        "SPARK_TABLES_TEST_KAFKA_LOOKUP_CHECKPOINT": str(base.home / "checkpoints" / f"{topic}-regions"),
    }
    deployment = dataclasses.replace(base, env={**base.env, **env}).with_dags(SCENARIOS)

    send(topic, [{"order_id": n, "shop": f"shop_{n % 3}", "amount": n} for n in range(1, 10)])
    first = dags_test(deployment, "kafka_plan_scenario")
    assert first.xcoms["big_orders"]["compile"]["written"] is True
    [query] = first.xcoms["big_orders"]["execute"]["queries"]
    assert query["input_rows"] == 9
    assert first.xcoms["big_orders"]["mode"] == mode
    assert _pg("SELECT order_id FROM kafka_scenario.big_orders ORDER BY 1") == [(n,) for n in range(6, 10)]
    counted = first.xcoms["shop_counts"]["query"]
    assert (counted["buffer"]["records_in"], counted["buffer"]["records_emitted"], counted["messages_sent"]) == (
        9,
        3,
        3,
    )
    assert sorted(messages(counts), key=str) == [
        ({"shop": f"shop_{n}"}, {"shop": f"shop_{n}", "orders": 3, "total": total})
        for n, total in ((0, 18), (1, 12), (2, 15))
    ]

    regions = first.xcoms["order_regions"]
    assert (regions["rows"], regions["output"]) == (9, "kafka_scenario_order_regions")
    assert regions["metrics"]["loadCount"] == 9 and "malformed_skipped" not in regions

    send(topic, [{"order_id": n, "shop": "shop_0", "amount": n} for n in (3, 12, 20)])
    second = dags_test(deployment, "kafka_plan_scenario")
    assert second.xcoms["big_orders"]["compile"] == {"written": False, "kept_existing": True}
    [query] = second.xcoms["big_orders"]["execute"]["queries"]
    assert query["input_rows"] == 3, "only the messages sent since the first run"
    assert _pg("SELECT order_id, amount FROM kafka_scenario.big_orders WHERE amount > 10 ORDER BY 1") == [
        (12, 12),
        (20, 20),
    ]
    assert second.xcoms["shop_counts"]["query"]["messages_sent"] == 1, "one message: the one shop that changed"
    assert messages(counts)[3:] == [({"shop": "shop_0"}, {"shop": "shop_0", "orders": 6, "total": 53})]
    assert second.xcoms["order_regions"]["rows"] == 3, "each message enriched once"
    _pg("DROP SCHEMA kafka_scenario CASCADE")
