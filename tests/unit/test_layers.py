"""The layers: import-linter's contracts in pyproject.toml hold, and core needs nothing but the standard library.

``core`` and ``jobs`` are zipped onto spark-submit's ``--py-files`` and imported on Spark drivers and executors,
where Airflow (and whatever only the Airflow side installs) is absent. The last test shows the check is not
vacuous: the same contracts fail on a copy of the package with one forbidden import added.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import spark_tables

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """import-linter on ``project``'s package and pyproject.toml, in a process of its own (its module cache)."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(project / "pyproject.toml"), "--no-cache"],
        cwd=project,
        env={"PYTHONPATH": str(project / "provider"), "PATH": str(LINT_IMPORTS.parent), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_import_contracts_are_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


def test_core_imports_only_the_standard_library() -> None:
    graph = grimp.build_graph("spark_tables", include_external_packages=True)
    imported = {
        imported.split(".")[0]
        for module in graph.modules
        if module.startswith("spark_tables.core")
        for imported in graph.find_modules_directly_imported_by(module)
        if not imported.startswith("spark_tables")
    }
    assert imported, "the graph found no import at all: the check would pass on anything"
    assert imported <= set(sys.stdlib_module_names), sorted(imported - set(sys.stdlib_module_names))


@pytest.mark.parametrize(
    ("module", "forbidden_import", "reported"),
    [
        ("core/durations.py", "import pendulum", "spark_tables.core.durations -> pendulum (l.1)"),
        ("core/identifiers.py", "import pyspark.sql", "spark_tables.core.identifiers -> pyspark (l.1)"),
        ("jobs/lookup/metrics.py", "import airflow.sdk", "spark_tables.jobs.lookup.metrics -> airflow (l.1)"),
        ("hooks/catalog.py", "import spark_tables.jobs.entry", "spark_tables.hooks.catalog -> spark_tables.jobs.entry"),
        (
            "tasks/cache/registry.py",
            "import spark_tables.xcom.cache_registry",
            "spark_tables.tasks.cache.registry -> spark_tables.xcom.cache_registry (l.1)",
        ),
    ],
)
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, module: str, forbidden_import: str, reported: str
) -> None:
    copy = tmp_path / "provider" / "spark_tables"
    shutil.copytree(Path(spark_tables.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = copy / module
    target.write_text(f"{forbidden_import}\n{target.read_text()}")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert reported in result.stdout, result.stdout


#: The one module that may use Airflow's API server from inside (the monitoring plugin's adapter), and what it may
#: import: the API server's authentication, session, the XCom table, the task instances and their earlier tries,
#: the serialized DAGs and the task log reader (tests/integration/test_monitoring_api.py,
#: test_monitoring_scheduler.py).
API_SERVER_ADAPTER = "airflow_api.py"
API_SERVER_MODULES = (
    "airflow.api_fastapi.",
    "airflow.models.xcom",
    "airflow.models.dagbag",
    "airflow.models.taskinstance",
    "airflow.utils.log.log_reader",
)


#: Airflow's public modules outside its providers: the Task SDK, its protocol of a running task instance (the type of
#: a context's ``ti``), and the base of triggers (Airflow's public interface names it; the Task SDK has none:
#: triggers/cached_table.py's trigger subclasses it).
PUBLIC_CORE_MODULES = ("airflow.sdk", "airflow.sdk.types", "airflow.triggers.base")


def test_airflow_is_used_through_its_public_modules() -> None:
    """``airflow.sdk`` and the providers' modules; not ``airflow.sdk.execution_time``, ``.bases``, ``.observability``
    or Airflow core's internals, which change without notice, but in the monitoring plugin's one adapter."""
    # Read from the source: grimp squashes external packages to their top level (``airflow``).
    private, checked = [], 0
    for path in Path(spark_tables.__file__).parent.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            words = line.split()
            if len(words) >= 2 and words[0] in ("from", "import") and words[1].split(".")[0] == "airflow":
                module, checked = words[1], checked + 1
                public = module in PUBLIC_CORE_MODULES or (
                    module.startswith("airflow.providers.") and not any(p.startswith("_") for p in module.split("."))
                )
                adapter = path.name == API_SERVER_ADAPTER and path.parent.name == "monitoring"
                public = public or (adapter and module.startswith(API_SERVER_MODULES))
                if not public:
                    private.append(f"{path.name}:{number}: {line.strip()}")
    assert not private
    assert checked > 10, "no Airflow import found: the check would pass on anything"
