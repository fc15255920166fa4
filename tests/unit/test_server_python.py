"""What a Spark Connect server's own Python gets of a job's function: the function and the provider's code with it,
unpickled in a Python that has pyspark but not this provider (as the tests' server has)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

from pyspark import cloudpickle

from spark_tables.core.durations import parse_duration
from spark_tables.jobs import connect_functions, server_python
from spark_tables.jobs.shipped_code import package_bytes

#: Unpickles what stdin holds (as Spark's worker does: the one unpickling) and calls it twice, printing each answer,
#: then what it is and where its package came from; ``-S``: without the provider's editable install (a ``.pth``
#: file), with the venv's packages on ``PYTHONPATH``.
CALL_TWICE = (
    "import pickle, sys; f = pickle.loads(sys.stdin.buffer.read()); "
    "print(f('90 s', 'x').total_seconds(), f('2 min', 'x').total_seconds()); "
    "print(type(f).__name__, f.__module__); print(sys.modules['spark_tables'].__file__)"
)


def _python_without_provider(code: str, stdin: bytes, temp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"], "TMPDIR": str(temp)}
    done = subprocess.run(
        [sys.executable, "-S", "-c", code], input=stdin, env=env, capture_output=True, check=False, timeout=120
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def test_a_carried_function_runs_where_the_provider_is_not_installed_from_the_zip_it_carries(tmp_path: Path):
    missing = _python_without_provider("import spark_tables", b"", tmp_path)
    assert "No module named 'spark_tables'" in missing.stderr, "the provider is importable there"

    carried = _carried(parse_duration)
    done = _python_without_provider(CALL_TWICE, cloudpickle.dumps(carried), tmp_path)

    assert done.returncode == 0, done.stderr
    answers, unpickled, module = done.stdout.splitlines()
    assert answers == "90.0 120.0"
    assert unpickled == "function spark_tables.core.durations", "the function itself, no wrapper unpickling it"
    own = tmp_path / f"spark_tables-{os.getuid()}"
    (written,) = own.glob("spark_tables-*.zip")
    assert module.startswith(str(written)), "imported from the zip it carried, written once"
    assert written.read_bytes() == package_bytes()
    assert stat.S_IMODE(own.stat().st_mode) == 0o700, "in a folder of the user's alone"


def test_a_zip_is_never_taken_from_a_folder_others_may_write(tmp_path: Path):
    """A folder of that name that others may write (someone made it first, and may have left a zip of their own,
    under the name the real one's contents give it, to be imported): the carried object refuses it, in one line."""
    carried = _carried(parse_duration)
    own = tmp_path / f"spark_tables-{os.getuid()}"
    own.mkdir()
    own.chmod(0o777)
    planted = own / f"spark_tables-{hashlib.sha256(package_bytes()).hexdigest()[:16]}.zip"
    planted.write_bytes(b"someone else's code")
    done = _python_without_provider(CALL_TWICE, cloudpickle.dumps(carried), tmp_path)

    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"PermissionError: {own} is not a folder of this user's that no one else may write: remove it (the provider "
        "makes it anew, mode 700), so that no file someone else put there is trusted"
    )
    assert planted.read_bytes() == b"someone else's code"


def test_a_zip_of_other_bytes_under_the_package_s_name_is_written_over_not_imported(tmp_path: Path):
    """Even in the user's own folder, a file under the name the package's bytes give is imported only if it holds
    those bytes (an earlier write cut short, a stray copy)."""
    carried = _carried(parse_duration)
    own = tmp_path / f"spark_tables-{os.getuid()}"
    own.mkdir(mode=0o700)
    planted = own / f"spark_tables-{hashlib.sha256(package_bytes()).hexdigest()[:16]}.zip"
    planted.write_bytes(b"not the package")

    done = _python_without_provider(CALL_TWICE, cloudpickle.dumps(carried), tmp_path)

    assert done.returncode == 0, done.stderr
    assert planted.read_bytes() == package_bytes()


def test_a_carried_function_is_called_as_itself_in_the_client():
    assert _carried(parse_duration)("1 s", "x").total_seconds() == 1.0


#: A session as ``is_connect`` tells a Spark Connect client's, by its class's module.
_ConnectSession = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})


def _carried(code: object) -> server_python.Carried:
    return connect_functions.carried(_ConnectSession(), code)  # type: ignore[arg-type]
