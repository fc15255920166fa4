"""The one module that uses Airflow's API server from inside: its authentication and DAG authorisation, its
database session, and the XCom table.

These are the API server's modules, not the Task SDK's public ones: a plugin's FastAPI app has no other way to
Airflow's own authentication (a Bearer token or the UI's ``_token`` cookie) and to the metadata the pages show.
``tests/unit/test_layers.py`` lets this module alone import them, and ``tests/integration/test_monitoring_api.py``
fails when they change. Every read is limited to DAGs the user may read: a route that takes ``dag_id`` in its
path depends on ``READ_DAG``; the overview reads only ``readable_dag_ids``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import Any

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.common.db.common import SessionDep
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.models.xcom import XComModel
from fastapi import Depends
from sqlalchemy import select

from spark_tables.plugins.monitoring.summaries import RecentResult, XComEntry

__all__ = ["READ_DAG", "GetUserDep", "SessionDep", "readable_dag_ids", "recent_results", "run_xcoms"]

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
    """The DAGs whose XComs ``user`` may read."""
    return set(get_auth_manager().get_authorized_dag_ids(user=user, method="GET", session=session))
