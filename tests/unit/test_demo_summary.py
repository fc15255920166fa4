"""scripts/demo_summary.py reads the examples' XComs as the operators write them: its compiled-plan lines from an
EXPLAIN PLAN output made by the provider's own ``explain`` (a renamed field once broke the demo's last step)."""

from __future__ import annotations

import importlib.util
from datetime import timedelta
from pathlib import Path
from typing import Any

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
    demo_summary: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
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
