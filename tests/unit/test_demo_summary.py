"""scripts/demo_summary.py reads the examples' XComs as the operators write them: its compiled-plan lines from an
EXPLAIN PLAN output made by the provider's own ``explain`` (a renamed field once broke the demo's last step)."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.explain import explain
from tests.unit.test_plan_document import example_2

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_summary.py"


@pytest.fixture
def demo_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))  # read when the script is loaded
    spec = importlib.util.spec_from_file_location("demo_summary", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_compiled_plan_lines_name_each_stateful_operator_what_runs_it_and_its_ttls(
    demo_summary: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    order_customers = tmp_path / "spark_tables" / "warehouse" / "plan_demo.db" / "order_customers"
    order_customers.mkdir(parents=True)
    pd.DataFrame({"order_id": range(150)}).to_parquet(order_customers / "part-0.parquet")
    _commit(order_customers, 0, {"commitInfo": {"operation": "MERGE"}}, {"add": {"path": "part-0.parquet"}})
    explained = explain(CompiledPlan.from_dict(example_2()), timedelta(0))
    query = {"sink": "order_customers", "input_rows": 200, "rows_upserted": 180, "rows_deleted": 0, "write_calls": 2}
    x = {
        "compile": {"compile": {"written": True}},
        "explain": {"plan_uri": "file:///plans/p.json", "explain": explained},
        "execute": {"execute": {"queries": [query]}},
    }
    monkeypatch.setattr(demo_summary, "xcoms", lambda dag_id, mode=None: x)

    lines = demo_summary.compiled_plans("", "spark_tables_test")

    stateful = [node for node in explained["nodes"] if "state" in node]
    assert stateful, "the example plan has stateful operators"
    for node in stateful:
        [line] = [line for line in lines if line.startswith(f"      [{node['id']}] ")]
        assert node["type"] in line and f" on {node['implementation']}" in line, line
        assert all(f"{state['name']} {state['ttl']}" in line for state in node["state"]), line
    assert any("order_customers" in line and "200 rows in" in line for line in lines)
    assert any("the Delta table its orders are merged into: 150 rows" in line for line in lines)


def _commit(table: Path, version: int, *actions: dict[str, Any]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in actions))


def test_a_delta_table_s_history_and_current_rows_are_read_from_its_log(demo_summary: Any, tmp_path: Path) -> None:
    """A REPLACE leaves the old version's files in the folder: the current rows are those of the files the log says
    are current, and the history names both versions."""
    table = tmp_path / "customer_totals"
    table.mkdir()
    pd.DataFrame({"customer": ["a", "b"], "orders": [1, 2]}).to_parquet(table / "part-0.parquet")
    pd.DataFrame({"customer": ["a", "b", "c"], "orders": [3, 4, 5]}).to_parquet(table / "part%201.parquet")
    metrics = {"numOutputRows": "2"}
    _commit(
        table,
        0,
        {"commitInfo": {"operation": "CREATE TABLE AS SELECT", "operationMetrics": metrics}},
        {"add": {"path": "part-0.parquet"}},
    )
    _commit(
        table,
        1,
        {"commitInfo": {"operation": "REPLACE TABLE AS SELECT", "operationMetrics": {"numOutputRows": "3"}}},
        {"remove": {"path": "part-0.parquet"}},
        {"add": {"path": "part%25201.parquet"}},
    )

    rows = demo_summary.delta_rows(f"file:{table}")

    assert sorted(rows["customer"]) == ["a", "b", "c"] and sorted(rows["orders"]) == [3, 4, 5]
    assert demo_summary.delta_history(str(table)) == [
        "      version 1  REPLACE TABLE AS SELECT, 3 rows",
        "      version 0  CREATE TABLE AS SELECT, 2 rows",
    ]


@pytest.mark.parametrize(("views_in_topic", "verdict"), [(3, "equals the tables' row"), (4, "does NOT equal")])
def test_the_buffered_output_lines_hold_the_topic_s_latest_messages_against_the_tables(
    demo_summary: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, views_in_topic: int, verdict: str
) -> None:
    """The topic's message of a key is told equal to the tables' row by its window start, which Spark's JSON gives
    with an offset and PostgreSQL's ``timestamp`` as the machine's local time."""
    start = datetime(2026, 1, 2, 0, 2)
    row = ("page_0", start, start + timedelta(minutes=2), 3, 2)
    buffered = {"records_in": 3, "records_emitted": 1, "flushes": {"end": 1}}
    query = {"input_rows": 3, "batches": 1, "rows_upserted": 1, "write_calls": 1, "buffer": buffered}
    x = {f"views_{way}": {"query": query} for way in demo_summary.WAYS}
    x["views_buffered_delta"] = {"query": {**query, "files_written": 1}}
    x["views_buffered_kafka"] = {"query": {**query, "batches": 2, "messages_sent": 1}}
    monkeypatch.setattr(demo_summary, "xcoms", lambda dag_id, mode=None: x)
    monkeypatch.setattr(demo_summary, "postgres_rows", lambda query: [row])
    monkeypatch.setattr(
        demo_summary, "delta_rows", lambda location: pd.DataFrame({"page": ["page_0"], "views": [3], "visitors": [2]})
    )
    sent_at = start.astimezone().isoformat(timespec="milliseconds")  # as to_json writes it, with the offset
    latest = {("page_0", sent_at): {"page": "page_0", "slot_start": sent_at, "views": views_in_topic, "visitors": 2}}
    monkeypatch.setattr(demo_summary, "latest_messages", lambda topic: latest)

    lines = demo_summary.buffered_output("", "spark_tables_test")

    assert any("views_buffered_kafka" in line and "1 messages sent in 1 write call(s)" in line for line in lines)
    assert any("the four tables are identical: 1 rows" in line for line in lines)
    assert any(f"latest message of each of its 1 keys {verdict}" in line for line in lines)
