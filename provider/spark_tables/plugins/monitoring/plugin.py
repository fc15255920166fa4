"""The provider's Airflow plugin, registered through the ``airflow.plugins`` entry point: the monitoring app on
Airflow's API server, a tab on every DAG run and task instance, and a page in the navigation.

Every Airflow process loads plugins (task processes too, for macros and listeners), but only the API server asks
for ``fastapi_apps``: the app, and the API server modules it uses, are imported then, so that no task start pays
for them.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from airflow.providers.common.compat.sdk import AirflowPlugin

from spark_tables.utils.monitoring_urls import OVERVIEW, RUN_TAB, TASK_TAB, URL_PREFIX, app_path


class SparkTablesPlugin(AirflowPlugin):
    name = "spark_tables"
    # The UI loads an ``href`` as it is: a path must carry ``[api] base_url``'s own path, as ``app_path()`` does.
    external_views: ClassVar[list[dict[str, str]]] = [
        {
            "name": "Spark tables",
            "href": app_path() + "/dags/{DAG_ID}/runs/{RUN_ID}",
            "destination": "dag_run",
            "url_route": RUN_TAB,
        },
        {
            "name": "Spark job",
            "href": app_path() + "/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}?map_index={MAP_INDEX}",
            "destination": "task_instance",
            "url_route": TASK_TAB,
        },
        {
            "name": "Spark tables",
            "href": app_path() + "/overview",
            "destination": "nav",
            "url_route": OVERVIEW,
        },
    ]

    @functools.cached_property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        from spark_tables.plugins.monitoring.app import create_app

        return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Spark tables"}]
