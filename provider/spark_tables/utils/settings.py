"""The provider's ``[spark_tables]`` configuration, read where a task runs."""

from __future__ import annotations

import datetime
import os

from airflow.providers.common.compat.sdk import conf

from spark_tables.core.durations import parse_duration
from spark_tables.core.sizes import parse_size

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


def cache_uri() -> str:
    """Root URI of cached tables' copies (``[spark_tables] cache_uri``); Airflow and every Spark node reach it."""
    return conf.get(SECTION, "cache_uri", fallback=None) or "file://" + os.path.join(home(), "cache")


def lookup_uri() -> str:
    """Root URI of lookup tables' full-cache snapshots (``[spark_tables] lookup_uri``), a folder per table, shared by
    every DAG that reads or reloads it; Airflow and every Spark node reach it."""
    return conf.get(SECTION, "lookup_uri", fallback=None) or "file://" + os.path.join(home(), "lookup")


def checkpoint_uri() -> str:
    """Root URI of executed plans' streaming checkpoints (``[spark_tables] checkpoint_uri``), a folder per plan, kept
    across runs so that each run resumes where the last ended; the Spark driver and executors reach it."""
    return conf.get(SECTION, "checkpoint_uri", fallback=None) or "file://" + os.path.join(home(), "checkpoints")


def aws_conn_id() -> str | None:
    """The ``aws`` connection through which Airflow and the jobs reach ``s3://`` and ``s3a://`` stores
    (``[spark_tables] aws_conn_id``, default ``aws_default``); None when set empty: each side's own credentials."""
    configured = conf.get(SECTION, "aws_conn_id", fallback="aws_default")
    return configured.strip() or None


def default_timezone() -> str:
    """Airflow's ``[core] default_timezone``: where a timed reload's time of day without an offset is read."""
    return conf.get("core", "default_timezone", fallback="utc") or "utc"


def cache_quota() -> int | None:
    """Bytes the copies under the cache root may take together (``[spark_tables] cache_quota``); None: no limit.

    Past it, the least recently used copies are evicted; a later reader of one computes it again.
    """
    configured = conf.get(SECTION, "cache_quota", fallback=None)
    return parse_size(configured, "[spark_tables] cache_quota") if configured else None


def cache_memory_quota() -> int | None:
    """Bytes the copies kept in one Spark Connect server's memory may take together (``[spark_tables]
    cache_memory_quota``); None: no limit. Past it, the least recently used are released from that memory."""
    configured = conf.get(SECTION, "cache_memory_quota", fallback=None)
    return parse_size(configured, "[spark_tables] cache_memory_quota") if configured else None


def cache_wait_timeout() -> datetime.timedelta:
    """How long a task waits for the copy of a cached table that another task computes (``[spark_tables]
    cache_wait_timeout``, default 1 hour); then it computes the table itself."""
    return parse_duration(conf.get(SECTION, "cache_wait_timeout", fallback="1 h"), "[spark_tables] cache_wait_timeout")


def cache_wait_check_interval() -> datetime.timedelta:
    """How often a waiting task asks Airflow whether the task computing its cached table still runs
    (``[spark_tables] cache_wait_check_interval``, default 1 minute)."""
    configured = conf.get(SECTION, "cache_wait_check_interval", fallback="1 min")
    return parse_duration(configured, "[spark_tables] cache_wait_check_interval")


def jvm_class_archive() -> str | None:
    """Folder of the local Spark drivers' class-data archive (``[spark_tables] jvm_class_archive``, default
    ``<home>/jvm``); None when it is ``off``."""
    configured = (conf.get(SECTION, "jvm_class_archive", fallback=None) or "").strip()
    if configured.lower() in ("off", "false", "no", "0"):
        return None
    return os.path.abspath(os.path.expanduser(configured)) if configured else os.path.join(home(), "jvm")


def other_xcom_backend() -> str | None:
    """The XCom backend of every value that is not the cache registry's (``[spark_tables] other_xcom_backend``, a
    class path such as ``airflow.providers.common.io.xcom.backend.XComObjectStorageBackend``); None: Airflow's own."""
    return (conf.get(SECTION, "other_xcom_backend", fallback=None) or "").strip() or None
