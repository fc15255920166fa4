"""Functions and stateful processors of this provider, run by a Spark Connect server's own Python, where the provider
is not installed.

Over Spark Connect, Spark runs some of a job's Python on the server's driver, in processes it starts there:
foreachBatch's function (``pyspark.sql.connect.streaming.worker.foreach_batch_worker``, one process per query) and
a transformWithState processor's ``init``, to learn its state's schema (``transform_with_state_driver_worker``).
Unlike executors' workers, those processes do not import the Python files a session ships
(``addArtifacts(pyfile=True)``), so an object of ``jobs/`` cannot even be unpickled there. ``Carried`` takes one
there with the provider's code: this module imports only the standard library, pyspark and ``core.private_files``
(itself only the standard library), and both are pickled by value (``connect_functions``). ``Carried`` pickles as
the object itself, with the provider's zip before it in the same pickle: unpickling the zip writes it into a folder
of the user's own in the temporary folder (``spark_tables-<uid>``, mode 700: no one else can leave a zip there),
under a name of its contents (a zip found under that name is used only if it holds those bytes, else written anew),
and puts it first on ``sys.path``, so that the object's classes, which come next in the pickle, import from it.
The object is unpickled once, by Spark itself, as any function a client sends: nothing here unpickles.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from typing import Any

from spark_tables.core.private_files import private_folder  # carried by value, as this module is


class Carried:
    """``carried`` as the server's Python unpickles it: itself, after ``package`` (the provider's zip) is on its
    ``sys.path``. Called here, it calls ``carried``."""

    def __init__(self, package: bytes, carried: Any) -> None:
        self.package = package
        self.carried = carried

    def __call__(self, *args: Any) -> Any:
        return self.carried(*args)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle saves a call's arguments in order, and unpickling runs them in that order: _Zip's call, which puts
        # the zip on sys.path, comes before the carried object's first class is looked up.
        return _second, (_Zip(self.package), self.carried)


class _Zip:
    """The provider's zip, which unpickles by being put on ``sys.path`` (``_put_on_path``)."""

    def __init__(self, package: bytes) -> None:
        self.package = package

    def __reduce__(self) -> tuple[Any, ...]:
        return _put_on_path, (self.package,)


def _second(_first: Any, second: Any) -> Any:
    return second


def _put_on_path(package: bytes) -> None:
    """Write ``package`` into this user's own folder unless it holds it already, and put it first on ``sys.path``."""
    digest = hashlib.sha256(package).hexdigest()[:16]
    path = os.path.join(_own_folder(), f"spark_tables-{digest}.zip")
    if not _holds(path, package):  # absent, or not these bytes: written anew, never imported as found
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".zip.tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(package)
        os.replace(temporary, path)
    if path not in sys.path:
        sys.path.insert(0, path)


def _holds(path: str, package: bytes) -> bool:
    """Whether the file at ``path`` holds exactly ``package``."""
    try:
        with open(path, "rb") as handle:
            return handle.read() == package
    except FileNotFoundError:
        return False


def _own_folder() -> str:
    """``spark_tables-<uid>`` in the temporary folder, this user's alone (``core.private_files``, carried by value)."""
    return private_folder(os.path.join(tempfile.gettempdir(), f"spark_tables-{os.getuid()}"))
