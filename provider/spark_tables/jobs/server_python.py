"""Functions and stateful processors of this provider, run by a Spark Connect server's own Python, where the provider
is not installed.

Over Spark Connect, Spark runs some of a job's Python on the server's driver, in processes it starts there:
foreachBatch's function (``pyspark.sql.connect.streaming.worker.foreach_batch_worker``, one process per query) and
a transformWithState processor's ``init``, to learn its state's schema (``transform_with_state_driver_worker``).
Unlike executors' workers, those processes do not import the Python files a session ships
(``addArtifacts(pyfile=True)``), so an object of ``jobs/`` cannot even be unpickled there. The classes here carry
one: this module imports only the standard library, pyspark and ``core.private_files`` (itself only the standard
library), and both are pickled by value (``connect_functions``), with the provider's zip and the object pickled by
reference. Where it runs, the first call writes the zip into a
folder of the user's own in the temporary folder (``spark_tables-<uid>``, mode 700: no one else can leave a zip
there), under a name of its contents (a zip found under that name is used only if it holds those bytes, else written
anew), puts it first on ``sys.path``
and unpickles the object; later calls (the query's next micro-batches, the processor's next keys) use it at once.
The object's pickle comes with the function Spark itself unpickles there, from the task's client; no file is
unpickled.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from spark_tables.core.private_files import private_folder  # carried by value, as this module is


class _Carried:
    """An object pickled with the code it imports: ``package`` is the provider's zip, ``pickled`` the object's
    pickle."""

    def __init__(self, package: bytes, pickled: bytes) -> None:
        self.package = package
        self.pickled = pickled
        self._object: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"package": self.package, "pickled": self.pickled, "_object": None}

    def carried(self) -> Any:
        if self._object is None:
            digest = hashlib.sha256(self.package).hexdigest()[:16]
            path = os.path.join(_own_folder(), f"spark_tables-{digest}.zip")
            if not _holds(path, self.package):  # absent, or not these bytes: written anew, never imported as found
                fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".zip.tmp")
                with os.fdopen(fd, "wb") as handle:
                    handle.write(self.package)
                os.replace(temporary, path)
            if path not in sys.path:
                sys.path.insert(0, path)
            # The object's pickle came in memory with the function Spark unpickles here, from the task's own client:
            # no file, nothing another process could have written.
            self._object = pickle.loads(self.pickled)
        return self._object


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


class CarriedFunction(_Carried):
    """A function (foreachBatch's), called as the carried one."""

    def __call__(self, *args: Any) -> Any:
        return self.carried()(*args)


class CarriedProcessor(_Carried, StatefulProcessor):
    """A transformWithState processor, each of its methods the carried one's."""

    def init(self, handle: Any) -> None:
        self.carried().init(handle)

    def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
        return self.carried().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
        return self.carried().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:
        self.carried().handleInitialState(key, initialState, timerValues)

    def close(self) -> None:
        self.carried().close()
