"""Runs one job of this provider through the Spark provider's ``SparkSubmitHook`` and reads its result back."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

from airflow.providers.common.compat.sdk import AirflowException, AirflowNotFoundException
from airflow.sdk import ObjectStoragePath

from spark_tables.core.catalog_config import Catalog
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import cancel_uri, local_path, spec_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.spark_log import LineTally
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.hooks.spark_submit import SparkSubmitAdapter
from spark_tables.utils import settings
from spark_tables.utils.catalog_lock import exclusive_catalog
from spark_tables.utils.class_archive import ClassArchive
from spark_tables.utils.job_package import ENTRY_SCRIPT, job_package
from spark_tables.utils.local_spark import java_binary, spark_binary_path
from spark_tables.utils.spark_master import is_standalone, unreachable

DEFAULT_MASTER = "local[*]"
#: The Spark connection's extra naming its Spark history server, for the tasks' "Spark application" link.
HISTORY_SERVER_EXTRA = "history-server-url"
DEPLOY_MODES = ("client", "cluster")
#: Seconds a stopped job has to undo what it created and exit, before its process group is ended.
CANCEL_GRACE_SECONDS = 60
#: Seconds between SIGTERM and SIGKILL when the process group is ended.
STOP_GRACE_SECONDS = 3
#: Longest spec passed on the command line (Linux refuses an argument over 128 KiB); a longer one, with the
#: descriptors of many cached partitions say, goes to a file in the exchange, as does one carrying a password (the
#: metastore's) or a database connection's arguments (a lookup table's, a sink's): a command line is visible to every
#: user of the machine, the file only to its owner.
INLINE_SPEC_BYTES = 64 * 1024
#: Derby's words for a database another JVM has booted (XSDB6), or the failure to start it that wraps them (XJ040).
_DERBY_BUSY = ("ERROR XSDB6", "ERROR XJ040", "Another instance of Derby may have already booted the database")


class SparkJobFailed(AirflowException):
    """The Spark job failed; the message is the job's own one-line error."""


class SparkMasterUnreachable(AirflowException):
    """The standalone master takes no connection: nothing was submitted. A retry may find it up again."""


class SparkJobHook(SparkSubmitAdapter):
    """Submits the bundled driver with a job spec and returns the job's result.

    Master, deploy mode and binary come from the ``spark`` connection ``conn_id``; when the default
    ``spark_default`` does not exist the job runs on ``local[*]``. Catalog settings come first in the Spark
    conf, so an explicit ``conf`` entry wins over them.
    """

    def __init__(
        self,
        *,
        spec: JobSpec,
        catalog: Catalog,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        py_files: str | None = None,
        driver_class_path: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            conf=_spark_conf(catalog, conf or {}),
            conn_id=conn_id,
            py_files=",".join(p for p in (job_package(os.path.join(settings.home(), "dist")), py_files) if p),
            driver_class_path=":".join(p for p in (catalog.driver_class_path, driver_class_path) if p) or None,
            **kwargs,
        )
        self._catalog = catalog
        #: What the job of the last ``run`` wrote back, also when ``run`` raised; None if it wrote nothing.
        self.last_result: JobResult | None = None
        self._derby_busy = False
        self._cancel_path: ObjectStoragePath | None = None
        master, deploy_mode = self.connection_settings["master"], self.connection_settings["deploy_mode"]
        if deploy_mode not in (None, *DEPLOY_MODES):
            raise SpecError(
                f"Spark connection {conn_id!r}: deploy-mode {deploy_mode!r} is invalid: use client or cluster"
            )
        if deploy_mode == "cluster" and is_standalone(master):
            raise SpecError(
                f"Spark connection {conn_id!r}: deploy-mode cluster on the standalone master {self.master}: Spark "
                "runs Python drivers only in client mode there: set deploy-mode client"
            )
        if master.startswith("local"):
            # Executors and driver use this Python, where the provider and pyspark are installed.
            self.spark_conf.setdefault("spark.pyspark.python", sys.executable)
            self.spark_conf.setdefault("spark.pyspark.driver.python", sys.executable)
        self._spec = dataclasses.replace(
            spec,
            watch_pid=os.getpid() if deploy_mode != "cluster" else None,
            session_conf=_session_conf(catalog, conf or {}, spec.session_conf),
        )
        archive_folder = settings.jvm_class_archive() if deploy_mode != "cluster" else None
        self._class_archive = ClassArchive(archive_folder, self.driver_class_path) if archive_folder else None
        spec_json = self._spec.to_json()
        self._spec_file: tuple[ObjectStoragePath, str] | None = None
        if (
            len(spec_json.encode()) > INLINE_SPEC_BYTES
            or self._spec.carries_credentials
            or self._spec.holds_connections
        ):
            self._spec_file = (ObjectStoragePath(spec_uri(self._spec.result_uri)), spec_json)
            self.application_args = [f"@{spec_uri(self._spec.result_uri)}"]
        else:
            self.application_args = [spec_json]
        java_binary()  # spark-submit is a JVM: fail here, with what to do, rather than in its output
        self._spark_binary_path = spark_binary_path(self.connection_settings["spark_binary"])

    @property
    def master(self) -> str:
        """The master URL the job runs on, without any user or password it may carry (it goes to XCom and pages)."""
        return re.sub(r"://[^/@]*@", "://", self.connection_settings["master"])

    def check_master(self) -> None:
        """Fail at once, naming the master, when a standalone master's port takes no connection (spark-submit would
        try to register with it for a minute and more before giving up)."""
        if not is_standalone(self.master):
            return
        problem = unreachable(self.master)
        if problem:
            raise SparkMasterUnreachable(
                f"Spark master {self.master} of connection {self.conn_id!r} cannot be reached ({problem}): start it, "
                "or correct the connection's host and port"
            )

    def application_url(self, application_id: str | None) -> str | None:
        """The application's page in the history server the connection names (extra ``history-server-url``)."""
        if not (self.history_server and application_id):
            return None
        return f"{self.history_server.rstrip('/')}/history/{quote(application_id, safe='')}/jobs/"

    def spark_binary_command(self, default: Callable[[], list[str]]) -> list[str]:
        return [self._spark_binary_path]

    def resolve_connection(self, resolve: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        try:
            conn = self.get_connection(self.conn_id)
        except AirflowNotFoundException:
            if self.conn_id != "spark_default":
                raise SpecError(
                    f"Spark connection {self.conn_id!r} does not exist: create it (type spark, host = master URL "
                    f"such as local[*] or spark://host:7077) or use spark_default, which defaults to {DEFAULT_MASTER}"
                ) from None
            conn = None
        self.history_server = (conn.extra_dejson.get(HISTORY_SERVER_EXTRA) or None) if conn is not None else None
        try:
            data = resolve()
        except ValueError as err:
            raise SpecError(f"Spark connection {self.conn_id!r} is invalid: {err}") from None
        if conn is None:
            self.log.info("no %s connection: running on %s", self.conn_id, DEFAULT_MASTER)
            data["master"] = DEFAULT_MASTER
            data["deploy_mode"] = self.deploy_mode_argument  # the parent applies it only when a connection exists
        return data

    def run(self) -> JobResult:
        """Submit the job and wait for it; raise ``SparkJobFailed`` with the job's one-line error if it fails.

        If this process is interrupted meanwhile (``execution_timeout`` raises in the middle of the wait), the job
        is first stopped in order, as ``on_kill`` does, so it undoes what it created before the task goes on.
        """
        result_path = ObjectStoragePath(self._spec.result_uri)
        cancel_path = ObjectStoragePath(cancel_uri(self._spec.result_uri))
        _prepare_exchange(result_path, cancel_path, self._spec_file)
        self._cancel_path = cancel_path
        self.last_result = None
        failure: AirflowException | None = None
        try:
            with exclusive_catalog(self._catalog, holder=self.app_name or "a Spark job"):
                self._use_class_archive()
                try:
                    self.submit(ENTRY_SCRIPT, start_new_session=True)
                except AirflowException as err:
                    failure = err
                except BaseException:
                    self._stop_and_wait()
                    raise
        finally:
            self._cancel_path = None
            cancel_path.unlink(missing_ok=True)
            if self._spec_file is not None:
                self._spec_file[0].unlink(missing_ok=True)
            self.last_result = _take_result(result_path)
            if self._class_archive is not None:
                self._class_archive.keep()
        if failure is not None:
            raise SparkJobFailed(self._failure_line(self.last_result)) from failure
        if self.last_result is None:
            raise SparkJobFailed(f"the Spark job ended without writing its result to {self._spec.result_uri}")
        if not self.last_result.succeeded:
            raise SparkJobFailed(self.last_result.error)
        return self.last_result

    def _use_class_archive(self) -> None:
        """Start the driver from the shared class-data archive, or have it write one (decided now: another task
        may have written it while this one waited for the catalog)."""
        if self._class_archive is None:
            return
        options = self.spark_conf.get("spark.driver.extraJavaOptions", "")
        try:
            option = self._class_archive.java_option(options)
        except OSError as err:  # an optimisation only: never the reason a task fails
            self.log.warning("not using a class-data archive for the driver: %s", err)
            return
        if option is not None:
            self.spark_conf["spark.driver.extraJavaOptions"] = f"{options} {option}".strip()

    def _failure_line(self, result: JobResult | None) -> str:
        if self._derby_busy:
            return (
                f"the embedded Derby metastore {getattr(self._catalog, 'metastore_path', '')} is in use by another "
                "Spark application: run one at a time, or configure a PostgreSQL metastore (docs/configuration.md)"
            )
        if result is not None and result.error:
            return result.error
        returncode = self.submit_process.returncode if self.submit_process else None
        errors = [line for line in self.recent_log_lines if "Exception" in line or "Error" in line]
        detail = f": {errors[-1]}" if errors else "; see the Spark driver log above"
        return f"spark-submit exited with code {returncode}{detail}"

    def watch_log(self, lines: Iterator[Any]) -> Iterator[Any]:
        """Each line on to the task log, but those of known harmless causes: counted, and summed up at the end."""
        tally = LineTally()
        for line in lines:
            if any(marker in line for marker in _DERBY_BUSY):
                self._derby_busy = True
            if tally.admit(line):
                yield line
        if summary := tally.summary():
            self.log.info(summary)

    def on_kill(self) -> None:
        """Ask the job to stop, so it interrupts its Spark jobs and undoes what it created, then exits.

        Returns at once, having done nothing but start a thread: Airflow calls this from its SIGTERM handler, in
        the middle of whatever the task's main thread was doing, and logging from there deadlocks when that was
        writing a log line (structlog's write lock is not reentrant). The task keeps reading the driver's log
        until it exits and fails with its result; a driver that has not exited ``CANCEL_GRACE_SECONDS`` later is
        ended with its whole process group.
        """
        process, cancel_path = self.submit_process, self._cancel_path
        if process is not None and process.poll() is None:
            threading.Thread(target=self._stop_job, args=(process, cancel_path), daemon=True).start()

    def _stop_and_wait(self) -> None:
        """Stop the job as ``on_kill`` does, and wait for it, still passing its log on (a full pipe would block it)."""
        process = self.submit_process
        if process is None or process.poll() is not None:
            return
        self.log.warning("the task was interrupted: asking the Spark job to stop and undo what it created")
        self.on_kill()
        self.pass_log_on(iter(process.stdout))
        process.wait()

    def _stop_job(self, process: subprocess.Popen, cancel_path: ObjectStoragePath | None) -> None:
        if cancel_path is not None:
            self.log.info("asking the Spark job to stop and undo what it created (%s)", cancel_path)
            cancel_path.write_text("stop")
        try:
            process.wait(timeout=CANCEL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self.log.warning("the job did not stop in %d s: ending process group %d", CANCEL_GRACE_SECONDS, process.pid)
            _stop_process_group(process)
            super().on_kill()  # the Spark provider's kill: YARN application, standalone driver, Kubernetes pod


def _spark_conf(catalog: Catalog, conf: dict[str, Any]) -> dict[str, Any]:
    """Catalog settings, then defaults, then the task's own conf; JVM option strings are joined, not replaced."""
    merged: dict[str, Any] = {**catalog.spark_conf(), "spark.log.level": "WARN"}
    for key, value in conf.items():
        joined = key.endswith(".extraJavaOptions") and key in merged
        merged[key] = f"{merged[key]} {value}" if joined else value
    return merged


def _session_conf(catalog: Catalog, conf: dict[str, Any], session_conf: Any) -> dict[str, str]:
    """The catalog's secret settings (its password), for the spec: never on spark-submit's command line. A setting
    the task's own conf gives is left out: that one wins, as over the catalog's other settings."""
    secrets = {key: value for key, value in catalog.secret_conf().items() if key not in conf}
    return {**secrets, **session_conf}


def _stop_process_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # what of the group outlived the JVM, such as the Python driver


def _write_private(path: ObjectStoragePath, text: str) -> None:
    """Write a file only its owner reads, where the file system has permissions (a local one)."""
    local = local_path(str(path))
    if local is None:
        path.write_text(text)
        return
    descriptor = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)


@reached_by_airflow
def _prepare_exchange(
    result_path: ObjectStoragePath, cancel_path: ObjectStoragePath, spec_file: tuple[ObjectStoragePath, str] | None
) -> None:
    """Clear what an earlier attempt of this try may have left, and write the spec file if the job has one."""
    for stale in (result_path, cancel_path):
        stale.unlink(missing_ok=True)
    if spec_file is not None:
        spec_path, spec_json = spec_file
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        _write_private(spec_path, spec_json)


@reached_by_airflow
def _take_result(path: ObjectStoragePath) -> JobResult | None:
    """Read the result the driver wrote and delete it; None if it wrote none."""
    if not path.exists():
        return None
    result = JobResult.from_json(path.read_text())
    path.unlink()
    return result
