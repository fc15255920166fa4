"""Extra links on this provider's Spark job tasks: the task's tab of the monitoring plugin, and its Spark
application in the history server, when the Spark connection names one (extra ``history-server-url``)."""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import BaseOperatorLink

from spark_tables.utils.monitoring_urls import task_tab_url


class SparkJobTabLink(BaseOperatorLink):
    name = "Spark job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return task_tab_url(ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)


class SparkApplicationLink(BaseOperatorLink):
    """The application's page in the Spark history server, when the Spark connection names one; no link before the
    job ran. Airflow asks for it when the try ends, failed or not: the operator keeps it (``application_url``), so
    that a failed try's link is there too, and no missing XCom is read."""

    name = "Spark application"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return getattr(operator, "application_url", None) or ""
