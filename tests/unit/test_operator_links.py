"""The extra links of this provider's Spark job tasks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from spark_tables.operators.links import SparkApplicationLink, SparkJobTabLink
from spark_tables.operators.sql import SparkSqlJobOperator
from spark_tables.plugins.monitoring.plugin import SparkTablesPlugin

TI_KEY = SimpleNamespace(dag_id="daily", run_id="manual__2026-11-25T17:49:12+00:00", task_id="sum up", map_index=-1)
RUN = "/dags/daily/runs/manual__2026-11-25T17%3A49%3A12%2B00%3A00"


def test_every_spark_job_task_links_to_its_tab_and_its_application() -> None:
    assert [link.name for link in SparkSqlJobOperator.operator_extra_links] == ["Spark job", "Spark application"]


def test_the_tab_link_is_the_task_instances_plugin_tab_in_the_ui(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    url = SparkJobTabLink().get_link(SimpleNamespace(), ti_key=TI_KEY)
    assert url == f"{RUN}/tasks/sum%20up/plugin/spark_tables_task"


def test_a_mapped_task_instance_links_to_its_own_tab_as_the_ui_routes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    mapped = SimpleNamespace(**{**vars(TI_KEY), "map_index": 3})
    url = SparkJobTabLink().get_link(SimpleNamespace(), ti_key=mapped)
    assert url == f"{RUN}/tasks/sum%20up/mapped/3/plugin/spark_tables_task"


def test_under_a_base_url_with_a_path_every_link_and_view_starts_with_that_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API server serves the UI and the plugin's app under ``[api] base_url``'s path, and the UI loads a
    view's ``href`` as it is."""
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example/team-a/")
    assert SparkJobTabLink().get_link(SimpleNamespace(), ti_key=TI_KEY).startswith(f"/team-a{RUN}/tasks/")
    import importlib

    import spark_tables.plugins.monitoring.plugin as plugin_module

    reloaded = importlib.reload(plugin_module).SparkTablesPlugin
    try:
        assert [view["href"].split("/{")[0] for view in reloaded.external_views] == [
            "/team-a/spark-tables/dags",
            "/team-a/spark-tables/dags",
            "/team-a/spark-tables/overview",
        ]
    finally:
        monkeypatch.delenv("AIRFLOW__API__BASE_URL")
        importlib.reload(plugin_module)
    assert SparkTablesPlugin.external_views[0]["href"].startswith("/spark-tables/")


def test_the_application_link_is_the_page_the_operator_kept_when_its_try_ended() -> None:
    """Airflow asks for the link when the try ends, failed or not, on the operator that ran it."""
    url = "http://history.example:18080/history/app-20261125174912-0001/jobs/"
    assert SparkApplicationLink().get_link(SimpleNamespace(application_url=url), ti_key=TI_KEY) == url


def test_no_application_link_without_a_history_server_or_before_the_job_ran() -> None:
    assert SparkApplicationLink().get_link(SimpleNamespace(application_url=None), ti_key=TI_KEY) == ""
    assert SparkApplicationLink().get_link(SimpleNamespace(), ti_key=TI_KEY) == ""  # the try never got that far
