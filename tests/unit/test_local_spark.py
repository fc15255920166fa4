"""Finding Java and spark-submit before anything starts."""

from __future__ import annotations

import os
import sys

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.utils.local_spark import java_binary, spark_binary_path


def test_spark_submit_on_path_is_used_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ['PATH']}")
    assert spark_binary_path("spark-submit") == "spark-submit"


def test_spark_submit_beside_this_python_is_used_when_path_lacks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert spark_binary_path("spark-submit") == os.path.join(os.path.dirname(sys.executable), "spark-submit")


def test_a_missing_spark_binary_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SpecError, match=r"^spark3-submit not found on PATH: install pyspark") as failure:
        spark_binary_path("spark3-submit")
    assert "\n" not in str(failure.value)


def test_missing_java_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SpecError, match=r"^java not found: install Java 17"):
        java_binary()


def test_java_home_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert java_binary() == str(java)
