"""An auth manager for the monitoring tests: Airflow's simple auth manager, with one DAG denied to one user, and that
DAG's XComs alone to another.

Configured as ``[core] auth_manager`` of the test's API server: Airflow's own extension point for authorisation.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

#: User name: the DAG ids that user may not see.
DENIED = {"bob": {"secret_monitored"}}
#: User name: the DAG ids that user may see, but not their XComs.
DENIED_XCOMS = {"carol": {"secret_monitored"}}


class DenyingAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        if details is not None and details.id in DENIED.get(user.get_name(), set()):
            return False
        xcoms = access_entity == DagAccessEntity.XCOM
        if xcoms and details is not None and details.id in DENIED_XCOMS.get(user.get_name(), set()):
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
