"""The provider's ``[spark_tables]`` configuration, read where a task runs."""

from __future__ import annotations

import os

from airflow.providers.common.compat.sdk import conf

SECTION = "spark_tables"


def home() -> str:
    """Folder for the embedded catalog, the packaged job code and job results (``[spark_tables] home``)."""
    configured = conf.get(SECTION, "home", fallback=None)
    if configured:
        return os.path.abspath(os.path.expanduser(configured))
    airflow_home = conf.get("core", "airflow_home", fallback=None) or os.environ.get("AIRFLOW_HOME", "~/airflow")
    return os.path.join(os.path.abspath(os.path.expanduser(airflow_home)), "spark_tables")


def exchange_uri() -> str:
    """Root URI of job results (``[spark_tables] exchange_uri``); both Airflow and the driver must reach it."""
    return conf.get(SECTION, "exchange_uri", fallback=None) or "file://" + os.path.join(home(), "exchange")
