"""Where the monitoring pages live on Airflow's API server (the plugin ``spark_tables.plugins.monitoring``), for the
plugin's own links and for the operators' extra links.

Every path starts with the path of Airflow's ``[api] base_url`` (``/airflow`` for ``http://host/airflow/``),
where the API server serves everything, the UI and the plugin's app, when one is set; ``""`` otherwise.
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from airflow.providers.common.compat.sdk import conf

#: Where the API server mounts the monitoring app, under the base path.
URL_PREFIX = "/spark-tables"
#: The UI's routes of the plugin's tabs (``/dags/<dag>/runs/<run>[/tasks/<task>]/plugin/<route>``) and nav page.
RUN_TAB, TASK_TAB, OVERVIEW = "spark_tables_run", "spark_tables_task", "spark_tables"


def base_path() -> str:
    """The path of Airflow's ``[api] base_url`` without its last slash: ``/airflow``, or ``""`` at the root."""
    return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")


def app_path() -> str:
    """Where the monitoring app is served: the base path and ``URL_PREFIX``."""
    return base_path() + URL_PREFIX


def run_path(dag_id: str, run_id: str) -> str:
    """A DAG run's page, under ``app_path()`` (its JSON under ``app_path() + "/api"``)."""
    return f"/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def task_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A task instance's page, under ``app_path()``."""
    return f"{run_path(dag_id, run_id)}/tasks/{quote(task_id, safe='')}?map_index={map_index}"


def task_tab_url(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The task instance's Spark job tab in the Airflow UI (a path on the API server); a mapped instance's tab is
    under ``/mapped/<index>``, as the UI routes it."""
    mapped = f"/mapped/{map_index}" if map_index >= 0 else ""
    return f"{base_path()}{run_path(dag_id, run_id)}/tasks/{quote(task_id, safe='')}{mapped}/plugin/{TASK_TAB}"
