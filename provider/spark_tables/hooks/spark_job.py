"""Runs one job of this provider through the Spark provider's ``SparkSubmitHook`` and reads its result back: in
this process, or as a durable job's driver detached from it (``core/durable_job.py``). The files it exchanges with
the driver are ``job_exchange``'s; stopping a driver, and watching a detached one, ``driver_processes``'s."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

from airflow.providers.common.compat.sdk import AirflowException, AirflowNotFoundException
from airflow.sdk import ObjectStoragePath

from spark_tables.core.catalog_config import Catalog, EmbeddedCatalog, says_derby_in_use
from spark_tables.core.durable_job import DriverFacts, DriverLaunch, DriverState, driver_state
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import cancel_uri, spec_uri, started_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import SECRET_NAME, SECRET_PATTERN, JobSpec
from spark_tables.core.jvm_jars import S3A_JARS
from spark_tables.core.kinds import KINDS
from spark_tables.core.private_files import guard_shared_folder, open_private
from spark_tables.core.spark_log import LineTally
from spark_tables.hooks.driver_processes import (
    CANCEL_GRACE_SECONDS,
    ended_how,
    process_alive,
    stop_process_group,
)
from spark_tables.hooks.job_exchange import (
    driver_log_path,
    forget_launched_files,
    prepare_exchange,
    started_application,
    take_result,
)
from spark_tables.hooks.object_storage import s3_access_for, storage_path
from spark_tables.hooks.spark_submit import SparkSubmitAdapter
from spark_tables.utils import settings
from spark_tables.utils.catalog_lock import exclusive_catalog
from spark_tables.utils.class_archive import ClassArchive
from spark_tables.utils.job_package import ENTRY_SCRIPT, job_package
from spark_tables.utils.local_spark import java_binary, spark_binary_path
from spark_tables.utils.log_following import follow_log, wait_until
from spark_tables.utils.spark_master import (
    MASTER_UI_EXTRA,
    application_active,
    is_standalone,
    master_ui_urls,
    unreachable,
)

DEFAULT_MASTER = "local[*]"
#: The Spark connection's extra naming its Spark history server, for the tasks' "Spark application" link.
HISTORY_SERVER_EXTRA = "history-server-url"
DEPLOY_MODES = ("client", "cluster")
#: Spark's setting of which settings its UI, event log and ``SET`` output hide.
REDACTION = "spark.redaction.regex"
#: Longest spec passed on the command line (Linux refuses an argument over 128 KiB); a longer one, with the
#: descriptors of many cached partitions say, goes to a file in the exchange, as does one carrying a password (the
#: metastore's) or a database connection's arguments (a lookup table's, a sink's): a command line is visible to every
#: user of the machine, the file only to its owner.
INLINE_SPEC_BYTES = 64 * 1024


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

    #: How the job runs, as XCom and the monitoring pages say it: a Spark application of its own.
    mode = "per-job"

    def __init__(
        self,
        *,
        spec: JobSpec,
        catalog: Catalog,
        conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        py_files: str | None = None,
        driver_class_path: str | None = None,
        jars: str | None = None,
        durable: bool = False,
        **kwargs: Any,
    ) -> None:
        catalog.check_loads(KINDS[spec.job.kind].table_formats(spec.job))
        #: How the job reaches S3, if it does: S3A's jars and conf, the connection's keys in spark-submit's environment.
        self.s3 = s3_access_for(json.loads(spec.to_json()), catalog.spark_conf(), conf or {})
        s3_conf = self.s3.spark_conf() if self.s3 else {}
        if self.s3 and self.s3.credentials:  # the executors' keys in Spark's UI and event log: hidden, key id too
            s3_conf[REDACTION] = SECRET_PATTERN
        super().__init__(
            conf=_spark_conf(catalog, {**s3_conf, **(conf or {})}),
            conn_id=conn_id,
            py_files=",".join(p for p in (job_package(os.path.join(settings.home(), "dist")), py_files) if p),
            driver_class_path=":".join(p for p in (catalog.driver_class_path, driver_class_path) if p) or None,
            jars=",".join(jar for jar in (*catalog.jars, *(S3A_JARS if self.s3 else ()), jars) if jar) or None,
            **kwargs,
        )
        self._catalog = catalog
        #: What the job of the last ``run`` wrote back, also when ``run`` raised; None if it wrote nothing.
        self.last_result: JobResult | None = None
        self._derby_busy = False
        self._cancel_path: ObjectStoragePath | None = None
        self._launch: DriverLaunch | None = None
        master, deploy_mode = self.connection_settings["master"], self.connection_settings["deploy_mode"]
        if deploy_mode not in (None, *DEPLOY_MODES):
            raise SpecError(
                f"Spark connection {conn_id!r}: deploy-mode {deploy_mode!r} is invalid: use client or cluster"
            )
        if deploy_mode == "cluster" and self.s3 is not None and self.s3.credentials:
            raise SpecError(
                f"Spark connection {conn_id!r}: deploy-mode cluster with S3 keys of connection "
                f"{settings.aws_conn_id()!r}: the keys reach a driver in its spark-submit's environment, and in "
                "cluster mode the driver runs elsewhere: give the cluster its own S3 credentials (an instance role) "
                "and set [spark_tables] aws_conn_id to a connection without keys, or use deploy-mode client"
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
        #: Whether the job's driver runs detached, to outlive this process (``core/durable_job.py``): not on a
        #: catalog that admits one application at a time (embedded Derby), whose lock this process holds.
        self.durable = durable and self.detaches and not catalog.exclusive
        self._spec = dataclasses.replace(
            spec,
            watch_pid=os.getpid() if deploy_mode != "cluster" and not self.durable else None,
            session_conf=_session_conf(catalog, conf or {}, spec.session_conf),
            durable=self.durable,
        )
        archive_folder = settings.jvm_class_archive() if deploy_mode != "cluster" else None
        self._class_archive = ClassArchive(archive_folder, self.driver_class_path) if archive_folder else None
        spec_json = self._spec.to_json()
        self._spec_file: tuple[ObjectStoragePath, str] | None = None
        if (
            len(spec_json.encode()) > INLINE_SPEC_BYTES
            or self._spec.carries_credentials
            or self._spec.holds_connections
            or self.durable  # a later try reads it back to take the job's result
        ):
            self._spec_file = (storage_path(spec_uri(self._spec.result_uri)), spec_json)
            self.application_args = [f"@{spec_uri(self._spec.result_uri)}"]
        else:
            self.application_args = [spec_json]
        java_binary()  # spark-submit is a JVM: fail here, with what to do, rather than in its output
        self._spark_binary_path = spark_binary_path(self.connection_settings["spark_binary"])

    def submit_environment(self) -> dict[str, str] | None:
        """spark-submit's environment: this process's, with the S3 connection's keys, endpoint and region."""
        return {**os.environ, **self.s3.environment()} if self.s3 is not None else None

    @property
    def detaches(self) -> bool:
        """Whether a driver can run detached from this process and be found again by a later try: on a standalone
        master in client mode, which says through its JSON API whether an application runs."""
        return (
            is_standalone(self.connection_settings["master"]) and self.connection_settings["deploy_mode"] != "cluster"
        )

    @property
    def spec(self) -> JobSpec:
        """The job spec the driver gets."""
        return self._spec

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
        if conn is not None and conn.conn_type != self.conn_type:
            raise SpecError(wrong_connection_type(self.conn_id, conn.conn_type))
        self.history_server = (conn.extra_dejson.get(HISTORY_SERVER_EXTRA) or None) if conn is not None else None
        self.master_ui = (conn.extra_dejson.get(MASTER_UI_EXTRA) or None) if conn is not None else None
        try:
            data = resolve()
        except ValueError as err:
            raise SpecError(f"Spark connection {self.conn_id!r} is invalid: {err}") from None
        if conn is None:
            self.log.info("Spark connection %r does not exist: the job runs on %s", self.conn_id, DEFAULT_MASTER)
            data["master"] = DEFAULT_MASTER
            data["deploy_mode"] = self.deploy_mode_argument  # the parent applies it only when a connection exists
        return data

    def run(self) -> JobResult:
        """Submit the job and wait for it; raise ``SparkJobFailed`` with the job's one-line error if it fails.

        If this process is interrupted meanwhile (``execution_timeout`` raises in the middle of the wait), the job
        is first stopped in order, as ``on_kill`` does, so it undoes what it created before the task goes on.
        """
        result_path = storage_path(self._spec.result_uri)
        cancel_path = storage_path(cancel_uri(self._spec.result_uri))
        prepare_exchange(result_path, cancel_path, self._spec_file)
        self._cancel_path = cancel_path
        self.last_result = None
        failure: AirflowException | None = None
        try:
            with exclusive_catalog(self._catalog, holder=self.app_name or "a Spark job"):
                self._use_class_archive()
                try:
                    self.submit(ENTRY_SCRIPT, start_new_session=True, env=self.submit_environment())
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
            self.last_result = take_result(result_path)
            if self._class_archive is not None:
                self._class_archive.keep()
        if failure is not None:
            self.log.debug("%s", failure)  # the command, its conf and spark-submit's last lines: the line says why
            raise SparkJobFailed(self._failure_line(self.last_result)) from None
        if self.last_result is None:
            raise SparkJobFailed(f"the Spark job ended without writing its result to {self._spec.result_uri}")
        if not self.last_result.succeeded:
            raise SparkJobFailed(self.last_result.error)
        return self.last_result

    def start_detached(self, try_number: int) -> DriverLaunch:
        """Start the durable job's driver detached from this process: in a session of its own, its output in a log
        file, not stopping when this process ends. What a later try needs to find it again."""
        result_path = storage_path(self._spec.result_uri)
        cancel_path = storage_path(cancel_uri(self._spec.result_uri))
        prepare_exchange(result_path, cancel_path, self._spec_file)
        storage_path(started_uri(self._spec.result_uri)).unlink(missing_ok=True)
        self._use_class_archive()
        log_path = driver_log_path(self._spec.result_uri)
        guard_shared_folder(os.path.dirname(log_path))
        with os.fdopen(open_private(log_path), "w") as log_file:
            self.submit_process = subprocess.Popen(
                self.submit_command(ENTRY_SCRIPT),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=self.submit_environment(),
            )
        self._cancel_path = cancel_path
        launch = DriverLaunch(
            result_uri=self._spec.result_uri,
            host=socket.gethostname(),
            pid=self.submit_process.pid,
            launched_at=time.time(),
            try_number=try_number,
        )
        self.log.info("Spark driver started detached (pid %d on %s), output in %s", launch.pid, launch.host, log_path)
        return launch

    def driver_state(self, launch: DriverLaunch) -> tuple[DriverState, str | None]:
        """What became of a launched driver, and the application it started, as far as this process can learn."""
        result_written = storage_path(launch.result_uri).exists()
        application_id = started_application(launch.result_uri)
        active = None
        if application_id is not None and not result_written:
            urls = master_ui_urls(self.connection_settings["master"], self.master_ui)
            active = application_active(urls, application_id)
        facts = DriverFacts(
            # Again: a driver may write its result and end between the first look and the master's answer.
            result_written=result_written or storage_path(launch.result_uri).exists(),
            application_id=application_id,
            application_active=active,
            process_alive=process_alive(launch),
            seconds_since_launch=time.time() - launch.launched_at,
        )
        return driver_state(facts), application_id

    def wait_detached(self, launch: DriverLaunch) -> JobResult:
        """Follow a detached driver's log into the task log until it ends, then take its result, as ``run`` does.

        The driver is this process's own when it started it, else a lost try's, whose state is asked for.
        """
        own = self.submit_process if self.submit_process is not None and self.submit_process.pid == launch.pid else None
        self._launch = launch
        self._cancel_path = storage_path(cancel_uri(launch.result_uri))

        def ended() -> bool:
            if own is not None:
                return own.poll() is not None
            return self.driver_state(launch)[0] not in (DriverState.STARTING, DriverState.RUNNING)

        try:
            log_path = driver_log_path(launch.result_uri)
            if os.path.exists(log_path):
                self.pass_log_on(follow_log(log_path, ended))
            else:
                self.log.info("the driver's log is on %s, in %s: waiting for its result", launch.host, log_path)
                wait_until(ended)
        except BaseException:  # interrupted (execution_timeout): the job stops in order, as in ``run``
            self._stop_and_wait()
            if own is not None:
                with contextlib.suppress(SparkJobFailed):
                    self.take_detached_result(launch, own)
            raise
        finally:
            self._cancel_path = None
        return self.take_detached_result(launch, own)

    def take_detached_result(self, launch: DriverLaunch, own: subprocess.Popen | None = None) -> JobResult:
        """Take the result a detached driver wrote, and the files beside it; raise ``SparkJobFailed`` as ``run``
        does when there is none, or it says the job failed. ``own``: the driver's process, when this one started
        it."""
        self.last_result = take_result(storage_path(launch.result_uri))
        if self.last_result is not None or own is not None:  # a lost driver's files stay, for who looks into it
            forget_launched_files(launch.result_uri)
        if self._class_archive is not None and own is not None:
            self._class_archive.keep()
        if self.last_result is None:
            if own is not None and own.returncode:
                raise SparkJobFailed(self._failure_line(None))
            raise SparkJobFailed(
                f"the Spark driver of try {launch.try_number} (pid {launch.pid} on {launch.host}) ended without "
                f"writing its result to {launch.result_uri} ({ended_how(launch)})"
            )
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
        if self._derby_busy and isinstance(self._catalog, EmbeddedCatalog):
            return self._catalog.in_use_error()
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
            if says_derby_in_use(line):
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
        elif self._launch is not None and cancel_path is not None:  # a lost try's driver, which this try waits for
            threading.Thread(target=cancel_path.write_text, args=("stop",), daemon=True).start()

    def _stop_and_wait(self) -> None:
        """Stop the job as ``on_kill`` does, and wait for it, still passing its log on (a full pipe would block it)."""
        process = self.submit_process
        if self._launch is not None and (process is None or process.pid != self._launch.pid):
            self.log.warning("the task was interrupted: asking try %d's Spark job to stop", self._launch.try_number)
            self.on_kill()
            return  # the driver's result says it stopped; the next try, or the failure callback, reads it
        if process is None or process.poll() is not None:
            return
        self.log.warning("the task was interrupted: asking the Spark job to stop and undo what it created")
        self.on_kill()
        if process.stdout is not None:
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
            stop_process_group(process)
            super().on_kill()  # the Spark provider's kill: YARN application, standalone driver, Kubernetes pod


def wrong_connection_type(conn_id: str, conn_type: str | None) -> str:
    """The one line of a task whose ``conn_id`` names a connection that is no Spark connection."""
    return (
        f"connection {conn_id!r} is of type {conn_type!r}, not a Spark connection: give conn_id a connection of type "
        "spark (spark-submit; host = the master URL, such as local[*] or spark://host:7077) or spark_connect (a Spark "
        "Connect server: session mode)"
    )


def _spark_conf(catalog: Catalog, conf: dict[str, Any]) -> dict[str, Any]:
    """spark-submit's ``--conf``: catalog settings, then defaults, then the task's own conf, but for settings whose
    names say they hold a secret (``_session_conf`` takes those); JVM option strings and SQL extensions are joined
    (the catalog's table formats keep theirs), not replaced."""
    merged: dict[str, Any] = {**catalog.spark_conf(), "spark.log.level": "WARN"}
    for key, value in conf.items():
        if key.endswith(".extraJavaOptions") and key in merged:
            merged[key] = f"{merged[key]} {value}"
        elif key == "spark.sql.extensions" and key in merged:
            merged[key] = f"{merged[key]},{value}"
        else:
            merged[key] = value
    return {key: value for key, value in merged.items() if not SECRET_NAME.search(key)}


def _session_conf(catalog: Catalog, conf: dict[str, Any], session_conf: Any) -> dict[str, str]:
    """The settings that hold a secret, for the spec file (mode 600), never spark-submit's command line, where ``ps``,
    the task log and Spark's UI would show them: the catalog's (its password), and the task's conf entries whose
    names say so (``fs.s3a.secret.key``, ``...password``, OpenLineage's API key), which win over the catalog's; with
    Spark's redaction of those names."""
    secrets = {key: value for key, value in catalog.secret_conf().items() if key not in conf}
    secrets |= {key: str(value) for key, value in conf.items() if SECRET_NAME.search(key)}
    if secrets and REDACTION not in conf:  # Spark's UI, event log and SET output hide what the job was given
        secrets[REDACTION] = SECRET_PATTERN
    return {**secrets, **session_conf}
