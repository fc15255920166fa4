"""Extra links on this provider's Spark job tasks: the task's tab of the monitoring plugin, and its Spark
application in the history server, when the Spark connection names one (extra ``history-server-url``)."""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom

from spark_tables.utils.monitoring_urls import task_tab_url


class SparkJobTabLink(BaseOperatorLink):
    name = "Spark job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return task_tab_url(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)


class SparkApplicationLink(BaseOperatorLink):
    """The application's page in the Spark history server, as the task's result names it (``application_url``,
    set when the job ran, from the connection it ran on); no link without a history server, or before the job ran."""

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        result = XCom.get_value(ti_key=ti_key, key="return_value")
        return (result.get("application_url") if isinstance(result, dict) else None) or ""
