"""A class-data archive of the Spark driver's JVM (Java's AppCDS): tasks start their drivers seconds sooner.

A local driver JVM spends seconds loading and verifying Spark's classes, the same ones on every task. The first
task on a worker asks its driver to archive the classes it loaded when it exits (``-XX:ArchiveClassesAtExit``);
later drivers map that archive (``-XX:SharedArchiveFile``) instead. The archive is specific to the Java
installation and the driver's class path, so its name carries a hash of both; a JVM that finds it does not match
says so in the driver log and starts the usual way. Archives of other keys (an older Spark, another class path)
unused for a week are removed when a new one is made. ``[spark_tables] jvm_class_archive``: the folder
(``<home>/jvm`` by default), or ``off``.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import logging
import os
import time

from spark_tables.utils.local_spark import java_binary, spark_jars_dir

log = logging.getLogger(__name__)

#: Java options that already choose a class-data archive: the user's choice is kept.
_USER_CHOICE = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")
#: Archives of other keys not used for this long are removed when a new archive is made.
UNUSED_FOR_SECONDS = 7 * 24 * 3600


class ClassArchive:
    """The archive for drivers started with ``driver_class_path`` under ``folder``, made by the first of them."""

    def __init__(self, folder: str, driver_class_path: str | None) -> None:
        self.folder = folder
        self.path = os.path.join(folder, f"spark-driver-{_key(driver_class_path)}.jsa")
        self._dumping: str | None = None

    def java_option(self, java_options: str) -> str | None:
        """The option that maps the archive, or makes this driver write it; None if the options choose one."""
        if any(choice in java_options for choice in _USER_CHOICE):
            return None
        if os.path.isfile(self.path):
            os.utime(self.path)  # in use: not to be removed as stale
            return f"-XX:SharedArchiveFile={self.path}"
        os.makedirs(self.folder, exist_ok=True)
        self._dumping = f"{self.path}.{os.getpid()}.tmp"
        log.info("this driver archives the classes it loads, for later tasks' drivers to start sooner: %s", self.path)
        # Its notes on each class it cannot archive (hundreds of lines) would flood the task log.
        return f"-XX:ArchiveClassesAtExit={self._dumping} -Xlog:cds=off -Xlog:cds+dynamic=off"

    def keep(self) -> None:
        """After the driver exited: publish the archive it wrote, if any, and remove stale archives of other keys."""
        if self._dumping is None:
            return
        dumped, self._dumping = self._dumping, None
        if not os.path.isfile(dumped) or os.path.getsize(dumped) == 0:
            with contextlib.suppress(FileNotFoundError):
                os.remove(dumped)
            return
        os.replace(dumped, self.path)  # whole or not at all; two tasks that both dumped publish either one
        for other in glob.glob(os.path.join(self.folder, "spark-driver-*.jsa")):
            with contextlib.suppress(FileNotFoundError):
                if other != self.path and time.time() - os.path.getmtime(other) > UNUSED_FOR_SECONDS:
                    os.remove(other)  # a driver mapping it keeps its mapping


def _key(driver_class_path: str | None) -> str:
    """Twelve hex digits of what the archive depends on: the Java binary and the driver's class path."""
    jars = sorted(glob.glob(os.path.join(spark_jars_dir(), "*.jar")))
    files = [os.path.realpath(java_binary()), *jars, *filter(None, (driver_class_path or "").split(":"))]
    parts = [f"{path}@{os.path.getmtime(path) if os.path.exists(path) else 'missing'}" for path in files]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
