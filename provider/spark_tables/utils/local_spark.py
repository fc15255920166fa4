"""The Spark and Java installations on this worker, found before anything is started."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

from spark_tables.core.errors import SpecError


def java_binary() -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` on PATH; Spark 4 needs Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return os.path.join(java_home, "bin", "java")
    found = shutil.which("java")
    if not found:
        raise SpecError("java not found: install Java 17 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    return found


def postgres_jdbc_driver(jar: str, setting: str) -> str:
    """``jar``, PostgreSQL's JDBC driver, if it is a file here; ``setting`` names where another path is given."""
    if not os.path.isfile(jar):
        raise SpecError(
            f"PostgreSQL JDBC driver not found at {jar}: fetch the jars jvm/pom.xml declares (scripts/setup.sh does; "
            f"docs/configuration.md#jvm-jars), or set {setting} to a jar's path or URL"
        )
    return jar


def spark_home() -> str:
    """``$SPARK_HOME``, or the Spark distribution inside the installed pyspark package, found without importing it
    (an import of pyspark costs a task process half a second or more)."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SpecError("pyspark is not installed in Airflow's environment: pip install pyspark, or set SPARK_HOME")
    return next(iter(spec.submodule_search_locations))


def spark_jars_dir() -> str:
    return os.path.join(spark_home(), "jars")


def spark_binary_path(binary: str) -> str:
    """``binary`` if PATH has it, else its full path beside the Python running this task.

    A virtual environment's ``bin`` is not on PATH when Airflow is started by its full path; pyspark installs
    ``spark-submit`` there.
    """
    if shutil.which(binary):
        return binary
    beside_python = os.path.join(os.path.dirname(sys.executable), binary)
    if os.access(beside_python, os.X_OK):
        return beside_python
    raise SpecError(
        f"{binary} not found on PATH: install pyspark in Airflow's environment, or put a Spark distribution's "
        "bin folder on PATH"
    )
