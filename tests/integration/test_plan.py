"""Compiled plans through `airflow dags test` on the embedded default: the example DAG compiles a statement set into
a plan file, edits a TTL in it, explains it and executes it into PostgreSQL, with real spark-submit jobs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import psycopg
import pytest

from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, Deployment, ExampleRun, dags_test, demo_connection

pytestmark = pytest.mark.integration

#: The database of the examples' PostgreSQL tables (their connection's), unless a test names another.
DATABASE = "spark_tables_test"
#: A warning line of Spark's log4j layout (``yy/MM/dd HH:mm:ss LEVEL logger: message``).
SPARK_WARNING = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d WARN ")


def _pg(query: str, database: str = DATABASE) -> list[tuple]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=database, user=PG_USER, autocommit=True) as db:
        cursor = db.execute(query)
        return cursor.fetchall() if cursor.description else []


def test_the_example_compiles_edits_explains_and_executes_a_plan(embedded: Deployment) -> None:
    deployment = dataclasses.replace(embedded, env={**embedded.env, **plan_demo_env(DATABASE, embedded.home)})
    prepare_example_plan(DATABASE)
    check_example_plan(dags_test(deployment, "example_spark_plan"), DATABASE)


def plan_demo_env(database: str, home: Path) -> dict[str, str]:
    """What the example reads from its environment: its PostgreSQL connection, on ``database``, and its plan's
    location, in the Airflow home ``home``."""
    return {
        "AIRFLOW_CONN_SPARK_TABLES_PLAN_DEMO": demo_connection(database),
        "SPARK_TABLES_PLAN_DEMO_URI": str(home / "plans" / "example_spark_plan.json"),
    }


def prepare_example_plan(database: str) -> None:
    """Before a run of the example: no sink tables of an earlier one in ``database``."""
    _pg("DROP TABLE IF EXISTS spark_tables_demo.shop_counts", database)


def check_example_plan(run: ExampleRun, database: str) -> None:
    """What the example's run did, its tables in ``database`` and its plan where its environment put it."""
    plan_file = Path(run.deployment.env["SPARK_TABLES_PLAN_DEMO_URI"])
    x = run.xcoms
    assert x["compile"]["compile"] == {"written": True, "replaced": False, "nodes": 13}
    plan = json.loads(plan_file.read_text())
    sinks = [(sink["name"], sink["kind"]) for sink in plan["sinks"]]
    assert len(plan["nodes"]) == 13 and sinks == [
        ("shop_counts", "postgres-upsert"),
        ("plan_demo.order_customers", "table-upsert"),  # its rows cast to the Delta table's columns: a calc more
    ]
    # EXPLAIN's structured result: the edited deduplication, the job's TTL on the count, the hint's on the join
    states = {node["type"]: node["state"] for node in x["explain"]["explain"]["nodes"] if "state" in node}
    assert [s["ttl"] for s in states["stream-exec-deduplicate"]] == ["3600000 ms"]
    assert [s["ttl"] for s in states["stream-exec-group-aggregate"]] == ["604800000 ms"]
    assert [(s["name"], s["ttl"]) for s in states["stream-exec-join"]] == [
        ("leftState", "3600000 ms"),
        ("rightState", "604800000 ms"),
    ]
    assert x["explain"]["explain"]["warnings"] == []
    implementations = {
        node["type"]: node["implementation"] for node in x["explain"]["explain"]["nodes"] if "implementation" in node
    }
    # the left join's orders have a TTL: it runs on Spark's join; the deduplication and the count do not
    assert implementations == {
        "stream-exec-deduplicate": "transform-with-state",
        "stream-exec-group-aggregate": "transform-with-state",
        "stream-exec-join": "spark-stream-join",
    }
    assert (
        "stream-exec-join_1" in run.log and "implementation spark-stream-join" in run.log
    )  # the graph in the task log
    check_example_plan_output(run, database)
    log = run.log
    if x["execute"]["mode"] == "session":  # no driver of its own, whose log would be the task's: the server's
        assert log.count("shipped the job's code to the session") == 4
        return
    # The four drivers' logs: Spark's warnings of known harmless causes summed up in one line a driver (the state
    # server warns at each first read of a key: 180 order ids, 5 shops), so at most a handful of warnings are left
    warnings = [line for line in log.splitlines() if SPARK_WARNING.search(line)]
    assert len(warnings) <= 5, "\n".join(warnings)
    sums = [line for line in log.splitlines() if "Spark warnings of known harmless causes, not shown" in line]
    assert len(sums) == 4, "\n".join(sums)
    first_reads = (
        "180 x TransformWithStateInPySparkStateServer: Value state first_seen doesn't contain a value",
        "5 x TransformWithStateInPySparkStateServer: Value state accumulator doesn't contain a value",
    )
    if x["execute"]["master"].startswith("local"):
        assert all(line in log for line in first_reads)
    else:  # the state server's first reads are the executors', which log elsewhere (the cluster's workers)
        assert "doesn't contain a value" not in log


def check_example_plan_output(run: ExampleRun, database: str) -> None:
    """What the example's EXECUTE PLAN wrote: its XComs, its PostgreSQL table in ``database`` and its Delta table in
    the catalog."""
    x = run.xcoms
    queries = {query["sink"]: query for query in x["execute"]["execute"]["queries"]}
    assert queries["shop_counts"]["input_rows"] == 200 and queries["shop_counts"]["write_calls"] == 1
    # 200 orders of 180 ids (the last 20 repeat the first 20): 36 orders per shop once deduplicated
    counts = dict(_pg("SELECT shop, orders FROM spark_tables_demo.shop_counts", database))
    assert counts == {f"shop_{n}": 36 for n in range(5)}
    totals = dict(_pg("SELECT shop, total FROM spark_tables_demo.shop_counts", database))
    assert totals == {f"shop_{n}": sum(i % 97 for i in range(180) if i % 5 == n) for n in range(5)}
    joined = run.deployment.read_back(
        "SELECT count(*), count(name), count_if(tier = 'gold') FROM plan_demo.order_customers"
    )
    # 180 orders; customers 0..29 exist, and a customer is gold when id % 4 = 0. The orders of customers 30..39
    # (none exist) are sent alone once their 1 h TTL has passed, by Spark's left join: not in this run
    with_customer = sum(1 for i in range(180) if i % 40 < 30)
    assert joined == [[with_customer, with_customer, sum(1 for i in range(180) if i % 40 < 30 and i % 40 % 4 == 0)]]
    merged = queries["plan_demo.order_customers"]
    assert merged["write_calls"] >= 1 and merged["files_written"] >= 1, "MERGEs into the Delta table, by order"
