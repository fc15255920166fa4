"""Airflow finds the provider through its entry point, with its connection type."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Deployment

pytestmark = pytest.mark.integration


def test_airflow_lists_the_provider_and_its_connection_type(embedded: Deployment) -> None:
    providers = embedded.airflow("providers", "list")
    assert providers.returncode == 0, providers.stderr[-2000:]
    assert "airflow-provider-spark-tables" in providers.stdout

    hooks = embedded.airflow("providers", "hooks")
    assert hooks.returncode == 0, hooks.stderr[-2000:]
    assert "spark_tables" in hooks.stdout
    assert "SparkTablesCatalogHook" in hooks.stdout
