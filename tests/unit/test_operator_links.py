"""The extra links of this provider's Spark job tasks."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from spark_tables.operators import links
from spark_tables.operators.links import SparkApplicationLink, SparkJobTabLink
from spark_tables.operators.sql import SparkSqlJobOperator

TI_KEY = SimpleNamespace(dag_id="daily", run_id="manual__2026-11-25T17:49:12+00:00", task_id="sum up", map_index=-1)


def test_every_spark_job_task_links_to_its_tab_and_its_application() -> None:
    assert [link.name for link in SparkSqlJobOperator.operator_extra_links] == ["Spark job", "Spark application"]


def test_the_tab_link_is_the_task_instances_plugin_tab_in_the_ui() -> None:
    url = SparkJobTabLink().get_link(SimpleNamespace(), ti_key=TI_KEY)
    assert url == "/dags/daily/runs/manual__2026-11-25T17%3A49%3A12%2B00%3A00/tasks/sum%20up/plugin/spark_tables_task"


@pytest.fixture
def result(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The task's result in XCom, as the link reads it."""
    value: dict[str, Any] = {"application_id": "app-20261125174912-0001"}
    monkeypatch.setattr(links.XCom, "get_value", lambda *, ti_key, key: value if key == "return_value" else None)
    return value


def test_the_application_link_goes_to_the_history_server_the_connection_names(
    set_connection: Callable[..., None], result: dict[str, Any]
) -> None:
    set_connection(
        "spark_cluster",
        conn_type="spark",
        host="spark://m:7077",
        extra={"history-server-url": "http://history.example:18080/"},
    )
    url = SparkApplicationLink().get_link(SimpleNamespace(conn_id="spark_cluster"), ti_key=TI_KEY)
    assert url == "http://history.example:18080/history/app-20261125174912-0001/jobs/"


def test_no_application_link_without_a_history_server_or_before_the_job_ran(
    set_connection: Callable[..., None], result: dict[str, Any]
) -> None:
    set_connection("spark_local", conn_type="spark", host="local[2]")
    assert SparkApplicationLink().get_link(SimpleNamespace(conn_id="spark_local"), ti_key=TI_KEY) == ""
    assert SparkApplicationLink().get_link(SimpleNamespace(conn_id="no_such_connection"), ti_key=TI_KEY) == ""
    set_connection(
        "spark_cluster",
        conn_type="spark",
        host="spark://m:7077",
        extra={"history-server-url": "http://history.example:18080"},
    )
    result.clear()
    assert SparkApplicationLink().get_link(SimpleNamespace(conn_id="spark_cluster"), ti_key=TI_KEY) == ""
