"""The tripwire for PySpark's private names: the provider uses them in one adapter module only, which lists them.

Jobs must also run as Spark Connect clients, where PySpark's Py4J handles (``_jvm``, ``_jsc``, ``_jdf``, ...) do
not exist, and a private name may change in any PySpark release. So every module of ``spark_tables`` is read (with
``ast``) for the private PySpark names it uses:

- an import from PySpark is private when the module's path or the name starts with ``_``, or when the name is not
  public in its module: in the module's ``__all__`` when it has one, otherwise the module must be one PySpark's API
  reference documents (``DOCUMENTED_MODULES``). ``DOCUMENTED_NAMES`` holds the few names the reference documents
  though their module's ``__all__`` leaves them out;
- an attribute ``x._name`` (``x`` not ``self`` or ``cls``) is private when PySpark's own source defines ``_name``
  (a method, or an attribute it assigns), as it does the Py4J handles.

The one adapter declares what it uses in ``PRIVATE_NAMES``; the test fails, naming file and line, on a private name
used anywhere else, and on a name the adapter lists but no longer uses.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pyspark
import pytest

import spark_tables

PROVIDER = Path(spark_tables.__file__).parent
PYSPARK = Path(pyspark.__file__).parent

#: The modules of PySpark's API reference (https://spark.apache.org/docs/latest/api/python/reference/) that
#: declare no ``__all__``: what they define without a leading ``_`` is public.
DOCUMENTED_MODULES = frozenset({"pyspark", "pyspark.sql.streaming", "pyspark.sql.window", "pyspark.sql.datasource"})
#: Names the API reference documents though their module's ``__all__`` leaves them out: transformWithState's
#: ``StatefulProcessor.handleInputRows`` and ``handleExpiredTimer`` take ``TimerValues`` and ``ExpiredTimerInfo``,
#: and ``StatefulProcessorHandle.getValueState`` returns a ``ValueState``.
DOCUMENTED_NAMES = {
    "pyspark.sql.streaming.stateful_processor": frozenset({"TimerValues", "ExpiredTimerInfo", "ValueState"}),
}


@dataclass(frozen=True, order=True)
class Use:
    """A private PySpark name used at ``path:line``: ``pyspark.x.name`` imported, or ``._name`` of an object."""

    path: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name}"


def _import(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _private_part(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def _public_module(module: str) -> bool:
    loaded = _import(module)
    return (
        not _private_part(module)
        and loaded is not None
        and (module in DOCUMENTED_MODULES or hasattr(loaded, "__all__"))
    )


def _public_name(module: str, name: str) -> bool:
    if _private_part(module) or _private_part(name):
        return False
    if importlib.util.find_spec(module) is not None and _import(f"{module}.{name}") is not None:
        return _public_module(f"{module}.{name}")  # a submodule: ``from pyspark.sql import functions``
    loaded = _import(module)
    if loaded is None:
        return False
    if name in DOCUMENTED_NAMES.get(module, ()):
        return True
    if hasattr(loaded, "__all__"):
        return name in loaded.__all__
    return module in DOCUMENTED_MODULES


@functools.cache
def _pyspark_sources() -> tuple[tuple[Path, bytes], ...]:
    return tuple((path, path.read_bytes()) for path in sorted(PYSPARK.rglob("*.py")) if "tests" not in path.parts)


@functools.cache
def _pyspark_defines(name: str) -> bool:
    """Whether PySpark's source defines ``name``: a function or method, or an attribute it assigns."""
    for _, source in _pyspark_sources():
        if name.encode() not in source:  # parse only the files that mention it
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return True
            if isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Store):
                return True
    return False


def _is_own(receiver: ast.expr) -> bool:
    return isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")


def private_uses(source: str, path: str) -> list[Use]:
    """The private PySpark names ``source`` uses, in the order they appear."""
    uses = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "pyspark":
            uses += [
                Use(path, node.lineno, f"{node.module}.{alias.name}")
                for alias in node.names
                if not _public_name(node.module, alias.name)
            ]
        elif isinstance(node, ast.Import):
            uses += [
                Use(path, node.lineno, alias.name)
                for alias in node.names
                if alias.name.split(".")[0] == "pyspark" and not _public_module(alias.name)
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not _is_own(node.value)
            and _pyspark_defines(node.attr)
        ):
            uses.append(Use(path, node.lineno, f".{node.attr}"))
    return sorted(uses)


def _declared(tree: ast.Module) -> tuple[str, ...] | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "PRIVATE_NAMES" for target in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    return None


@functools.cache
def _provider() -> dict[str, tuple[list[Use], tuple[str, ...] | None]]:
    """Per module of the provider: the private PySpark names it uses, and those it declares (None: no adapter)."""
    found = {}
    for path in sorted(PROVIDER.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        relative = str(path.relative_to(PROVIDER.parent))
        found[relative] = (private_uses(source, relative), _declared(ast.parse(source)))
    return found


def test_one_adapter_declares_the_private_pyspark_names() -> None:
    adapters = [path for path, (_, declared) in _provider().items() if declared is not None]
    assert adapters == ["spark_tables/jobs/lookup/arrow_types.py"]


def test_private_pyspark_names_are_used_in_the_adapter_only() -> None:
    outside = [str(use) for uses, declared in _provider().values() if declared is None for use in uses]
    assert outside == [], "private PySpark names outside the adapter (use the public API, or the adapter):\n" + (
        "\n".join(outside)
    )


def test_the_adapter_lists_exactly_the_private_names_it_uses() -> None:
    for path, (uses, declared) in _provider().items():
        if declared is None:
            continue
        used = {use.name for use in uses}
        assert sorted(used - set(declared)) == [], f"{path} uses private names it does not list in PRIVATE_NAMES"
        assert sorted(set(declared) - used) == [], f"{path} lists private names it no longer uses"


SAMPLE = """\
import pyspark
import pyspark.sql.pandas.types
from pyspark.sql import DataFrame, SparkSession, functions as F
from pyspark.sql.types import AtomicType, StructType
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, TimerValues
from pyspark._globals import _NoValue


class Files:
    def __init__(self, spark: SparkSession) -> None:
        self._jvm = spark.sparkContext._jvm
        self._spark = spark

    def conf(self):
        return self._spark.sparkContext._jsc.hadoopConfiguration(), self._jvm.org


def frame_of(df: DataFrame):
    return df._jdf, df.sparkSession, os._exit
"""


def test_the_scan_finds_private_imports_and_py4j_handles() -> None:
    assert [str(use) for use in private_uses(SAMPLE, "sample.py")] == [
        "sample.py:2 pyspark.sql.pandas.types",
        "sample.py:4 pyspark.sql.types.AtomicType",
        "sample.py:5 pyspark.sql.pandas.types.to_arrow_type",
        "sample.py:7 pyspark._globals._NoValue",
        "sample.py:12 ._jvm",
        "sample.py:16 ._jsc",
        "sample.py:20 ._jdf",
    ]


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("pyspark.sql", "functions"),
        ("pyspark.sql.streaming", "StreamingQuery"),
        ("pyspark.errors", "AnalysisException"),
    ],
)
def test_the_public_api_is_not_flagged(module: str, name: str) -> None:
    assert _public_name(module, name)


def _concrete_subclasses(base: type) -> set[type]:
    found, todo = set(), [base]
    while todo:
        for subclass in todo.pop().__subclasses__():
            todo.append(subclass)
            if not subclass.__subclasses__():
                found.add(subclass)
    return found


@pytest.mark.parametrize(
    ("group", "base"),
    [
        ("SIMPLE", "AtomicType"),
        ("NUMERIC", "NumericType"),
        ("INTEGRAL", "IntegralType"),
        ("FRACTIONAL", "FractionalType"),
    ],
)
def test_the_type_groups_are_pyspark_s_own(group: str, base: str) -> None:
    """``jobs/data_types.py`` stands for PySpark's non-public base classes: the same types, in this release."""
    from pyspark.sql import types

    from spark_tables.jobs import data_types

    assert set(getattr(data_types, group)) == _concrete_subclasses(getattr(types, base))
