"""Packaging as Airflow's providers do it: every distribution the package imports is declared, one version."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import spark_tables

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(spark_tables.__file__).parent


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _imported_modules() -> set[str]:
    modules: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module)
    return {m for m in modules if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "spark_tables"}


def _distribution_of(module: str) -> str:
    """The distribution that installs ``module``: Airflow's providers by their package, the rest by top level."""
    parts = module.split(".")
    if parts[:2] == ["airflow", "providers"]:
        provider_parts = 2 if parts[2] in ("apache", "common") else 1
        return "apache-airflow-providers-" + "-".join(parts[2 : 2 + provider_parts])
    if parts[0] == "airflow":
        return "apache-airflow"
    [distribution, *_] = importlib.metadata.packages_distributions()[parts[0]]
    return _canonical(distribution)


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_canonical(re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]) for requirement in project["dependencies"]}


def test_every_imported_distribution_is_declared() -> None:
    imported = {_distribution_of(module) for module in _imported_modules()}
    assert "apache-airflow-providers-apache-spark" in imported and "pyspark" in imported  # the scan sees imports
    assert imported - _declared() == set(), "imported but not declared in pyproject.toml's dependencies"


def test_the_version_has_one_source() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "spark_tables.__version__"}
    assert importlib.metadata.version("airflow-provider-spark-tables") == spark_tables.__version__


def test_the_package_is_marked_typed_and_classified_as_an_airflow_provider() -> None:
    assert (PACKAGE / "py.typed").is_file()
    metadata = importlib.metadata.metadata("airflow-provider-spark-tables")
    classifiers = metadata.get_all("Classifier") or []
    assert {"Framework :: Apache Airflow", "Framework :: Apache Airflow :: Provider"} <= set(classifiers)
    assert metadata.get_all("Project-URL")
