"""Extra links on this provider's Spark job tasks: the task's tab of the monitoring plugin, and its Spark
application in the history server, when the Spark connection names one (extra ``history-server-url``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom

from spark_tables.hooks.spark_job import history_server_url
from spark_tables.utils.monitoring_urls import task_tab_url


class SparkJobTabLink(BaseOperatorLink):
    name = "Spark job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return task_tab_url(ti_key.dag_id, ti_key.run_id, ti_key.task_id)


class SparkApplicationLink(BaseOperatorLink):
    """The application's page in the Spark history server; no link without one, or before the job has run."""

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        server = history_server_url(operator.conn_id)
        result = XCom.get_value(ti_key=ti_key, key="return_value") if server else None
        application_id = result.get("application_id") if isinstance(result, dict) else None
        if not (server and application_id):
            return ""
        return f"{server.rstrip('/')}/history/{quote(application_id, safe='')}/jobs/"
