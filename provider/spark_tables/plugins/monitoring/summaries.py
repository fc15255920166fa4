"""What the monitoring pages show of a DAG run and of a task instance, read from the XComs this provider's tasks
leave: plain data in, plain data out.

A task's ``return_value`` says what its Spark job did (``SparkJobOperator.xcom_value``: the job's typed output with
its ``kind`` and ``version``, its application and timings, and ``caches`` when it used cached tables); a failed try
leaves the same shape under ``FAILED_TRY``, with its error and cleanup. What a page shows of a job's own output is
its kind's summary, kept with its capability (``core.kinds``), chosen by the kind the XCom names. Cached tables'
copies are ``cache_copies``'s, the overview across runs ``overview``'s, failed tries ``failed_tries``'s. Nothing
here reads Airflow or Spark: the routes hand these functions the XComs and task instances, already checked against
the user's access.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from spark_tables.core.job_result import RESULT_KEYS, RESULT_VERSION
from spark_tables.core.kinds import kind_of
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.plugins.monitoring.cache_copies import cached_tables
from spark_tables.plugins.monitoring.entries import RETURN_VALUE, XComEntry

#: The keys of a job's output that say where and how long it ran.
#: ``mode``: ``per-job`` (an application of its own, through spark-submit) or ``session`` (on a Spark Connect server).
JOB_KEYS = ("application_id", "application_url", "master", "mode", "spark_version", "session_seconds", "work_seconds")
#: The keys a failed try's report adds to the job's output.
FAILURE_KEYS = ("try_number", "error", "cleanup")


def run_summary(entries: Iterable[XComEntry]) -> dict[str, Any]:
    """A DAG run's cached tables, CTAS tables and lookup joins, from its XComs."""
    entries = list(entries)
    results = [entry for entry in entries if entry.key in (RETURN_VALUE, FAILED_TRY) and isinstance(entry.value, dict)]
    return {
        "caches": cached_tables(entries),
        "ctas": [table for entry in results for table in ctas_tables(entry)],
        "lookups": [lookup for entry in results if (lookup := lookup_join(entry)) is not None],
        "jobs": [
            {"task_id": entry.task_id, "map_index": entry.map_index, **job_of(entry.value), **failure_of(entry)}
            for entry in results
            if is_job_result(entry.value) or entry.key == FAILED_TRY
        ],
    }


def task_summary(entries: Iterable[XComEntry]) -> dict[str, Any]:
    """One task instance's job kind, Spark job, CTAS steps, cache uses and lookup metrics, from its XComs."""
    entries = list(entries)
    ranked = [e for e in entries if e.key == RETURN_VALUE and isinstance(e.value, dict)]
    ranked += [e for e in entries if e.key == FAILED_TRY] + [e for e in entries if e.key == RETURN_VALUE]
    result = next(iter(ranked), None)  # a result, else a failed try's report, else what the task returned
    if result is None or not isinstance(result.value, dict):
        return {
            "kind": None,
            "job": None,
            "failure": None,
            "output": None if result is None else result.value,
            "ctas": [],
            "caches": [],
            "lookup": None,
        }
    hidden = (*JOB_KEYS, *FAILURE_KEYS, *RESULT_KEYS, "caches")
    return {
        "kind": result_kind(result.value),
        "job": job_of(result.value) if is_job_result(result.value) else None,
        "failure": failure_of(result).get("failure"),
        "output": {key: value for key, value in result.value.items() if key not in hidden},
        "ctas": ctas_tables(result),
        "caches": [{"name": name, **use} for name, use in sorted((result.value.get("caches") or {}).items())],
        "lookup": lookup_join(result),
    }


def job_of(value: dict[str, Any]) -> dict[str, Any]:
    return {key: value.get(key) for key in JOB_KEYS}


def is_job_result(value: Any) -> bool:
    """Whether ``value`` is a job's result (or a failed try's report that has one): it names its kind and version."""
    return result_kind(value) is not None


def result_kind(value: Any) -> str | None:
    """The kind of job whose output ``value`` holds, as it names it; None for a value that is no job's (or of
    another release)."""
    if isinstance(value, dict) and value.get("version") == RESULT_VERSION and kind_of(value.get("kind")) is not None:
        return value["kind"]
    return None


def kind_summary(entry: XComEntry) -> dict[str, Any]:
    """What the pages show of the job's output in a task's result or a failed try's report: its kind's summary
    (``ctas``, ``lookup``, ``undone_before``, ``undone``); empty for a value that is no job's."""
    kind = kind_of(result_kind(entry.value))
    if kind is None:
        return {}
    return kind.summary(entry.value, failure_of(entry).get("failure"))


def failure_of(entry: XComEntry) -> dict[str, Any]:
    """A failed try's number, error and cleanup (``{"failure": ...}``); ``{}`` for a task's result."""
    if entry.key != FAILED_TRY:
        return {}
    return {"failure": {key: entry.value.get(key) for key in FAILURE_KEYS}}


def ctas_tables(entry: XComEntry) -> list[dict[str, Any]]:
    """The CTAS tables a task's job made or undid, each with its ``steps``: a CTAS task's one table, or a SQL job's
    CTAS statements; in a failed try's report, with the error and what was undone after it."""
    return [{"task_id": entry.task_id, **row} for row in kind_summary(entry).get("ctas", [])]


def lookup_join(entry: XComEntry) -> dict[str, Any] | None:
    """A lookup join's or reload's table, cache mode and metrics; None for any other task."""
    lookup = kind_summary(entry).get("lookup")
    return None if lookup is None else {"task_id": entry.task_id, **lookup}


def run_label(run_id: str) -> str:
    """A run as a chart's label names it: its kind and when, from an id Airflow made (``manual__2026-11-25T22:03:43
    .622423+00:00`` is ``manual 2026-11-25 22:03:43``), else the id itself."""
    kind, _, when = run_id.partition("__")
    try:
        moment = datetime.datetime.fromisoformat(when)
    except ValueError:
        return run_id
    return f"{kind} {moment:%Y-%m-%d %H:%M:%S}"
