"""Where the monitoring pages live on Airflow's API server (the plugin ``spark_tables.plugins.monitoring``), for the
plugin's own links and for the operators' extra links."""

from __future__ import annotations

from urllib.parse import quote

#: Where the API server mounts the monitoring app.
URL_PREFIX = "/spark-tables"
#: The UI's routes of the plugin's tabs (``/dags/<dag>/runs/<run>[/tasks/<task>]/plugin/<route>``) and nav page.
RUN_TAB, TASK_TAB, OVERVIEW = "spark_tables_run", "spark_tables_task", "spark_tables"


def run_path(dag_id: str, run_id: str) -> str:
    """A DAG run's page, under ``URL_PREFIX`` (its JSON under ``URL_PREFIX + "/api"``)."""
    return f"/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def task_path(dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """A task instance's page, under ``URL_PREFIX``."""
    return f"{run_path(dag_id, run_id)}/tasks/{quote(task_id, safe='')}?map_index={map_index}"


def task_tab_url(dag_id: str, run_id: str, task_id: str) -> str:
    """The task instance's Spark job tab in the Airflow UI (a path on the API server)."""
    return f"{run_path(dag_id, run_id)}/tasks/{quote(task_id, safe='')}/plugin/{TASK_TAB}"
