"""The one module that uses Airflow's API server from inside: its authentication and DAG authorisation, its
database session, the XCom table, the task instances and their earlier tries, the DAGs as serialized, and the
task logs.

These are the API server's modules, not the Task SDK's public ones: a plugin's FastAPI app has no other way to
Airflow's own authentication (a Bearer token or the UI's ``_token`` cookie) and to the metadata the pages show.
``tests/unit/test_layers.py`` lets this module alone import them, and ``tests/integration/test_monitoring_api.py``
fails when they change. Every read is limited to DAGs the user may read: a route that takes ``dag_id`` in its
path depends on ``READ_DAG``; the overview reads only ``readable_dag_ids``.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterable
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.models.dagbag import DBDagBag
from airflow.models.taskinstance import TaskInstance
from airflow.models.taskinstancehistory import TaskInstanceHistory
from airflow.models.xcom import XComModel
from airflow.sdk import TaskInstanceState
from airflow.utils.log.log_reader import TaskLogReader
from fastapi import Depends
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from spark_tables.plugins.monitoring.entries import XComEntry
from spark_tables.plugins.monitoring.failed_tries import FailedTry, error_line
from spark_tables.plugins.monitoring.overview import RecentResult

__all__ = [
    "READ_DAG",
    "GetUserDep",
    "SessionDep",
    "failed_provider_tries",
    "may_read_logs",
    "readable_dag_ids",
    "recent_results",
    "run_xcoms",
    "try_error_line",
]

log = logging.getLogger(__name__)

#: The states a task instance ends a failed try in: failed, or failed with a try left.
FAILED_STATES = [TaskInstanceState.FAILED, TaskInstanceState.UP_FOR_RETRY]
#: The modules of this provider's operators and sensors; a task of a class from elsewhere is this provider's when
#: it carries the provider's "Spark job" link, as every Spark job operator (and its subclasses) does.
PROVIDER_MODULE, PROVIDER_LINK = "spark_tables.", "Spark job"

#: A route's dependency: the user may read the XComs of the DAG named by the route's ``dag_id`` path parameter
#: (401 without a token, 403 for a DAG the auth manager denies). The parameter must be called ``dag_id``:
#: Airflow reads it from the path by that name.
READ_DAG = Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.XCOM))


def run_xcoms(
    session: Any, dag_id: str, run_id: str, task_id: str | None = None, map_index: int | None = None
) -> list[XComEntry]:
    """The XComs of a DAG run (of one task instance, with ``task_id`` and ``map_index``), decoded."""
    query = select(XComModel.task_id, XComModel.map_index, XComModel.key, XComModel.value).where(
        XComModel.dag_id == dag_id, XComModel.run_id == run_id
    )
    if task_id is not None:
        query = query.where(XComModel.task_id == task_id)
    if map_index is not None:
        query = query.where(XComModel.map_index == map_index)
    rows = session.execute(query.order_by(XComModel.timestamp, XComModel.task_id, XComModel.key)).all()
    return [XComEntry(row.task_id, row.map_index, row.key, XComModel.deserialize_value(row)) for row in rows]


def recent_results(
    session: Any, dag_ids: Iterable[str], since: datetime.datetime, keys: Iterable[str], limit: int
) -> tuple[list[RecentResult], bool]:
    """The XComs under ``keys`` of the given DAGs since ``since``, oldest first: at most the ``limit`` latest, and
    whether older ones were left out."""
    dag_ids = sorted(dag_ids)
    if not dag_ids:
        return [], False
    query = (
        select(
            XComModel.dag_id,
            XComModel.run_id,
            XComModel.task_id,
            XComModel.map_index,
            XComModel.key,
            XComModel.value,
            XComModel.timestamp,
        )
        .where(XComModel.key.in_(list(keys)), XComModel.dag_id.in_(dag_ids), XComModel.timestamp >= since)
        .order_by(XComModel.timestamp.desc())
        .limit(limit + 1)
    )
    rows = session.execute(query).all()
    results = [
        RecentResult(
            row.dag_id,
            row.run_id,
            row.timestamp.isoformat(),
            XComEntry(row.task_id, row.map_index, row.key, XComModel.deserialize_value(row)),
        )
        for row in rows[:limit]
    ]
    return results[::-1], len(rows) > limit


def readable_dag_ids(user: Any, session: Any) -> set[str]:
    """The DAGs ``user`` may read."""
    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session))


def xcom_readable(user: Any, dag_ids: set[str]) -> set[str]:
    """Of ``dag_ids``, the DAGs whose XComs ``user`` may read: what the pages show of runs comes from their XComs
    (cache definitions with their SQL, locations, lookup definitions, failed tries' errors)."""
    manager = get_auth_manager()
    return {
        dag_id
        for dag_id in dag_ids
        if manager.is_authorized_dag(
            method="GET", access_entity=DagAccessEntity.XCOM, details=DagDetails(id=dag_id), user=user
        )
    }


def may_read_logs(user: Any, dag_id: str) -> bool:
    """Whether ``user`` may read the task logs of ``dag_id``, which the error of a failed try is read from."""
    return get_auth_manager().is_authorized_dag(
        method="GET", access_entity=DagAccessEntity.TASK_LOGS, details=DagDetails(id=dag_id), user=user
    )


def failed_provider_tries(
    session: Any, dag_ids: Iterable[str], since: datetime.datetime, limit: int
) -> tuple[list[FailedTry], bool]:
    """The tries of this provider's tasks in the given DAGs that failed since ``since``, newest first: the latest
    tries (task instances) and the earlier ones (their history), at most ``limit``, and whether more were left
    out. A task is this provider's as its DAG's version serialized it (its class's module, or its links)."""
    dag_ids = sorted(dag_ids)
    if not dag_ids:
        return [], False
    rows = []
    for model in (TaskInstance, TaskInstanceHistory):
        query = (
            select(
                model.dag_id,
                model.run_id,
                model.task_id,
                model.map_index,
                model.try_number,
                model.end_date,
                model.dag_version_id,
            )
            .where(model.dag_id.in_(dag_ids), model.state.in_(FAILED_STATES), model.end_date >= since)
            .order_by(model.end_date.desc())
            .limit(limit + 1)
        )
        rows += session.execute(query).all()
    rows.sort(key=lambda row: row.end_date, reverse=True)
    dags = DBDagBag()
    ours: dict[tuple[Any, str], bool] = {}
    tries = []
    for row in rows:
        key = (row.dag_version_id, row.task_id)
        if key not in ours:
            ours[key] = _provider_task(dags, session, *key)
        if ours[key]:
            tries.append(
                FailedTry(row.dag_id, row.run_id, row.task_id, row.map_index, row.try_number, row.end_date.isoformat())
            )
    return tries[:limit], len(tries) > limit


def _provider_task(dags: DBDagBag, session: Any, version_id: Any, task_id: str) -> bool:
    dag = dags.get_dag(version_id, session=session) if version_id is not None else None
    if dag is None or not dag.has_task(task_id):
        return False
    task = dag.get_task(task_id)
    links = {getattr(link, "name", None) for link in getattr(task, "operator_extra_links", None) or ()}
    return str(getattr(task, "_task_module", "")).startswith(PROVIDER_MODULE) or PROVIDER_LINK in links


def try_error_line(session: Any, failed: FailedTry) -> str | None:
    """A failed try's error in one line, read from its log as the UI reads it; None when the log has none or
    cannot be read (said in the API server's log)."""
    where = []
    for model in (TaskInstance, TaskInstanceHistory):
        where = [
            model.dag_id == failed.dag_id,
            model.run_id == failed.run_id,
            model.task_id == failed.task_id,
            model.map_index == failed.map_index,
            model.try_number == failed.try_number,
        ]
        ti = session.scalar(select(model).where(*where).options(joinedload(model.dag_run)))
        if ti is not None:
            break
    else:
        return None
    try:
        messages, _ = TaskLogReader().read_log_chunks(ti, failed.try_number, {})
        return error_line(m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages)
    except Exception as err:  # a page about everything else is still worth showing
        log.warning("could not read the log of %s, try %d: %s", failed.task_id, failed.try_number, err)
        return None
