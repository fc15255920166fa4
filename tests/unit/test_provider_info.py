from __future__ import annotations

import importlib
import importlib.metadata
import importlib.resources
import json

import jsonschema
import pytest
from packaging.utils import canonicalize_name

from spark_tables import __version__
from spark_tables.get_provider_info import get_provider_info

DISTRIBUTION = "airflow-provider-spark-tables"


def test_provider_info_validates_against_airflows_schema():
    schema = json.loads(importlib.resources.files("airflow").joinpath("provider_info.schema.json").read_text())

    jsonschema.validate(get_provider_info(), schema)


def test_package_name_is_the_canonical_distribution_name():
    name = importlib.metadata.distribution(DISTRIBUTION).metadata["Name"]

    assert get_provider_info()["package-name"] == canonicalize_name(name) == DISTRIBUTION


def test_version_is_the_distribution_version():
    assert get_provider_info()["versions"][0] == __version__ == importlib.metadata.version(DISTRIBUTION)


def test_entry_point_points_at_get_provider_info():
    entry_points = importlib.metadata.distribution(DISTRIBUTION).entry_points

    (entry_point,) = [ep for ep in entry_points if ep.group == "apache_airflow_provider"]
    assert entry_point.load() is get_provider_info


LISTED_MODULES = [
    module
    for section in ("operators", "hooks")
    for item in get_provider_info()[section]
    for module in item["python-modules"]
]


@pytest.mark.parametrize("module", LISTED_MODULES)
def test_listed_modules_import(module):
    importlib.import_module(module)


@pytest.mark.parametrize("connection_type", get_provider_info()["connection-types"], ids=lambda c: c["connection-type"])
def test_connection_type_names_a_hook_of_that_type(connection_type):
    module, _, name = connection_type["hook-class-name"].rpartition(".")

    hook_class = getattr(importlib.import_module(module), name)

    assert hook_class.conn_type == connection_type["connection-type"]
    assert hook_class.hook_name == connection_type["hook-name"]


@pytest.mark.parametrize("link", get_provider_info()["extra-links"])
def test_listed_extra_links_are_operator_links(link):
    from airflow.providers.common.compat.sdk import BaseOperatorLink

    module, _, name = link.rpartition(".")
    assert issubclass(getattr(importlib.import_module(module), name), BaseOperatorLink)
