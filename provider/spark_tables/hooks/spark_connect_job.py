"""Runs one job of this provider in session mode: as a Spark Connect client from the task process, on the server a
``spark_connect`` connection of the Spark provider names (``SparkConnectHook``).

FLIP-36's session cluster: the server is one long-running Spark application, so a task starts no JVM of its own,
and what a job leaves in the application (a cached global view) outlives the task. The job is the same function of
``jobs/`` that the spark-submit driver runs (``jobs.entry.run_job``), with the same spec and result; it runs in a
thread of the task process, so that the task's own thread can stop it in order (``on_kill``, ``execution_timeout``):
the job's operations on the server are interrupted and its code undoes what it created, as a driver's does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.common.compat.sdk import AirflowException, AirflowNotFoundException, BaseHook

from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.kinds import KINDS
from spark_tables.core.object_storage import S3Access
from spark_tables.hooks.driver_processes import CANCEL_GRACE_SECONDS
from spark_tables.hooks.object_storage import s3_access_for
from spark_tables.hooks.spark_job import SparkJobFailed
from spark_tables.utils import settings
from spark_tables.utils.job_package import job_package
from spark_tables.utils.reachability import connection_problem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_tables.jobs.cancellation import Cancellation

#: The Spark provider's connection type of a Spark Connect server: a task on one runs in session mode.
CONNECT_CONN_TYPE = SparkConnectHook.conn_type
#: Spark Connect's port when the connection names none (pyspark's ``ChannelBuilder.default_port``).
DEFAULT_PORT = 15002
#: Seconds between two looks at the job's thread: the task's own thread wakes as often, to run Airflow's signal
#: handlers (SIGTERM calls ``on_kill``), since the kernel may hand a signal to any thread of the process.
JOIN_SECONDS = 0.5
#: Seconds between two interruptions of a stopped job's operations, until its thread ends.
INTERRUPT_AGAIN_SECONDS = 1.0
#: Seconds to wait for the server's port to take a connection before the task fails naming it.
REACH_SECONDS = 10.0


#: pyspark's mark of a process whose sessions are Spark Connect clients (``pyspark.sql.utils.is_remote``): the
#: Connect builder sets it and nothing unsets it, and with it a later classic session, or a spark-submit this process
#: starts (it inherits the environment), asks for a Connect URL.
CONNECT_MODE_VARIABLE = "SPARK_CONNECT_MODE_ENABLED"


@contextlib.contextmanager
def connect_session(url: str) -> Iterator[SparkSession]:
    """A new Spark Connect session on ``url``, stopped at the end; pyspark's process-wide Connect mark holds only
    meanwhile, so that a per-job task after this one (``airflow dags test`` runs a DAG's tasks in one process) starts
    its spark-submit as a classic driver."""
    from pyspark.sql import SparkSession

    marked = CONNECT_MODE_VARIABLE in os.environ
    try:
        spark = SparkSession.builder.remote(url).create()
        try:
            yield spark
        finally:
            spark.stop()
    finally:
        if not marked:
            os.environ.pop(CONNECT_MODE_VARIABLE, None)


@contextlib.contextmanager
def storage_environment(s3: S3Access | None) -> Iterator[None]:
    """This process's environment with the S3 connection's variables while the job runs in it, then as it was: the
    job's code reaches S3 through s3fs, which reads them (``core/object_storage.py``)."""
    variables = s3.environment() if s3 is not None else {}
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def connects_to_server(conn_id: str) -> bool:
    """Whether the Spark connection ``conn_id`` is a Spark Connect server's (type ``spark_connect``): its tasks run in
    session mode. A connection that does not exist is not: spark-submit's hook says what is missing."""
    try:
        return BaseHook.get_connection(conn_id).conn_type == CONNECT_CONN_TYPE
    except AirflowNotFoundException:
        return False


class SparkConnectUnreachable(AirflowException):
    """The Spark Connect server takes no connection: nothing ran. A retry may find it up again."""


@dataclasses.dataclass(frozen=True)
class ConnectServer:
    """The Spark Connect server a ``spark_connect`` connection names: the URL pyspark's channel takes (with the
    connection's user, token and TLS setting: never logged) and the server's address."""

    conn_id: str
    url: str
    host: str
    port: int

    @classmethod
    def of(cls, conn_id: str) -> ConnectServer:
        """The server of connection ``conn_id``; a connection that does not exist, or names no host, fails in one
        line."""
        try:
            url = SparkConnectHook(conn_id=conn_id).get_connection_url()
        except AirflowNotFoundException:
            raise SpecError(
                f"Spark Connect connection {conn_id!r} does not exist: create it (type spark_connect, host and port "
                f"of the server, {DEFAULT_PORT} by default)"
            ) from None
        except ValueError as err:
            raise SpecError(f"Spark Connect connection {conn_id!r} is invalid: {err}") from None
        address = urlparse(url)
        if not address.hostname:
            raise SpecError(f"Spark Connect connection {conn_id!r} names no host: set the server's host and port")
        return cls(conn_id, url, address.hostname, address.port or DEFAULT_PORT)

    @property
    def master(self) -> str:
        """The server, as XCom and the logs name it: without the token or user the connection URL carries."""
        return f"sc://{self.host}:{self.port}"

    def session_url(self, session_id: str) -> str:
        """The URL of a session of its own (the provider's URL ends in "/" or "/;<parameters>")."""
        return f"{self.url};session_id={session_id}"

    def check_reachable(self) -> None:
        """Fail at once, naming the server, when its port takes no connection (pyspark's client would retry for
        minutes before giving up)."""
        problem = connection_problem(self.host, self.port, REACH_SECONDS)
        if problem is not None:
            raise SparkConnectUnreachable(
                f"Spark Connect server {self.master} of connection {self.conn_id!r} cannot be reached "
                f"({problem}): start it, or correct the connection's host and port"
            )


class SparkConnectJobHook(BaseHook):
    """Runs ``spec``'s job on the Spark Connect server of connection ``conn_id`` and returns its result.

    ``conf`` is set on the job's Connect session (runtime settings only: the server's static ones are its own).
    The connection's token and TLS setting reach pyspark's channel in the connection URL, which is never logged.
    ``name`` tags the job's operations, so the server's UI shows whose they are. ``jars`` (local files: a JDBC
    driver, say) are shipped to the session with the job's code, for its driver and executors.
    """

    #: How the job runs, as XCom and the monitoring pages say it.
    mode = "session"
    #: A job in session mode runs on the server, not in a driver that could outlive the task process.
    durable = False

    def __init__(
        self,
        *,
        spec: JobSpec,
        conn_id: str,
        conf: dict[str, Any] | None = None,
        name: str = "",
        jars: Sequence[str] = (),
    ) -> None:
        super().__init__()
        refusal = KINDS[spec.job.kind].refused_in_session_mode(spec.job)
        if refusal is not None:
            raise SpecError(refusal)
        remote = [jar for jar in jars if "://" in jar and not jar.startswith("file://")]
        if remote:
            raise SpecError(
                f"jar {remote[0]}: a Spark Connect session takes jars from files of the task's machine, not URLs: "
                "give a local path, or put the jar on the server's classpath and leave it out"
            )
        self.jars = tuple(jars)
        #: How the job's own code, in this process, reaches S3 (the server's Spark has its own S3A settings).
        self.s3 = s3_access_for(json.loads(spec.to_json()))
        self.conn_id = conn_id
        self.server = ConnectServer.of(conn_id)
        #: A session of its own, named so that the server's logs and UI tell this task's operations apart.
        self.session_id = str(uuid.uuid4())
        self._url = self.server.session_url(self.session_id)
        self.conf = {key: str(value) for key, value in (conf or {}).items()}
        self.name = name
        self._spec = spec
        self.last_result: JobResult | None = None
        #: The job, while it runs.
        self._running: RunningJob | None = None

    @property
    def spec(self) -> JobSpec:
        return self._spec

    @property
    def master(self) -> str:
        return self.server.master

    def application_url(self, application_id: str | None) -> str | None:
        """No history server link: the server's own UI shows its running application."""
        return None

    def check_master(self) -> None:
        self.server.check_reachable()

    def run(self) -> JobResult:
        """Start a Connect session, check the server's Spark version, run the job and wait for it; raise
        ``SparkJobFailed`` with the job's one-line error if it fails.

        If this thread is interrupted meanwhile (``execution_timeout`` raises in the middle of the wait), the job is
        first stopped in order, as ``on_kill`` does, so it undoes what it created before the task goes on. A job still
        running ``CANCEL_GRACE_SECONDS`` after a stop was asked for is left to the server, its session released.
        """
        from spark_tables.jobs.cancellation import Cancellation
        from spark_tables.jobs.entry import run_job

        self.last_result = None
        started = time.monotonic()
        with connect_session(self._url) as spark, storage_environment(self.s3):
            self._check_version(spark)
            self._set_conf(spark)
            self._ship_job_code(spark)
            session_seconds = round(time.monotonic() - started, 3)
            self.log.info(
                "Spark Connect session %s on %s (Spark %s) started in %.1f s",
                self.session_id,
                self.master,
                spark.version,
                session_seconds,
            )
            cancellation = Cancellation()
            cancellation.interrupt_with(spark.interruptAll)
            outcome: list[JobResult] = []
            spec = self._spec

            # The job's end is an event, not the thread's: a join interrupted by an exception (execution_timeout's)
            # takes a thread that still runs for ended (CPython 3.11's threading, bpo-45274).
            ended = threading.Event()

            def work() -> None:
                try:
                    if self.name:  # a tag holds for the thread that adds it; Spark Connect's tags take no comma
                        spark.addTag(self.name.replace(",", "_"))
                    outcome.append(run_job(spark, spec.job, cancellation, spec.caches, spec.shared_folders))
                finally:
                    ended.set()

            running = self._running = RunningJob(cancellation, ended)
            threading.Thread(target=work, name="spark-tables-job", daemon=True).start()
            try:
                # Not one wait: a signal another thread takes would not wake it.
                while not ended.wait(JOIN_SECONDS) and not running.unstopped.is_set():
                    pass
            except BaseException:
                self.log.warning("the task was interrupted: asking the Spark job to stop and undo what it created")
                running.stop("the Airflow task was interrupted (timed out or stopped)")
                if running.unstopped.is_set():
                    self.log.error("%s", unstopped_error(self.master))
                raise
            finally:
                self._running = None
                if outcome:
                    self.last_result = _with_session_seconds(outcome[0], session_seconds)
            given_up = not ended.is_set()
        if given_up:  # the session is released: the job's thread ends with it, the server's operation may not
            raise SparkJobFailed(unstopped_error(self.master))
        if self.last_result is None:
            raise SparkJobFailed("the Spark job ended without a result: see the task log above")
        if not self.last_result.succeeded:
            raise SparkJobFailed(self.last_result.error)
        return self.last_result

    def _check_version(self, spark: SparkSession) -> None:
        import pyspark

        server, client = spark.version, pyspark.__version__
        if server.split(".")[0] != client.split(".")[0]:
            raise SpecError(
                f"Spark Connect server {self.master} runs Spark {server}, this provider's client is Spark {client}: "
                f"use a server of Spark {client.split('.')[0]}"
            )

    def _ship_job_code(self, spark: SparkSession) -> None:
        """This provider's code, as the session's Python files: the job's functions that Spark runs in the server's
        Python workers (lookups' ``mapInArrow``, UDFs) import it there, where the server's own Python need not have it
        installed. The zip is the one spark-submit ships (``--py-files``), named after its contents."""
        package = job_package(os.path.join(settings.home(), "dist"))
        spark.addArtifacts(package, pyfile=True)
        self.log.info("shipped the job's code to the session: %s (%d KB)", package, os.path.getsize(package) // 1024)
        if self.jars:
            spark.addArtifacts(*self.jars)
            self.log.info("shipped the job's jars to the session: %s", ", ".join(self.jars))

    def _set_conf(self, spark: SparkSession) -> None:
        """The task's conf on its session; a setting the server fixes at its start fails in one line."""
        from pyspark.errors import PySparkException

        for key, value in self.conf.items():
            try:
                spark.conf.set(key, value)
            except PySparkException as err:
                raise SpecError(
                    f"conf {key}: cannot be set on a Spark Connect session ({err.getCondition() or err}): a "
                    "setting of the server's start belongs in its own configuration"
                ) from None

    def on_kill(self) -> None:
        """Ask the job to stop: its operations on the server are interrupted and it undoes what it created.

        Returns at once, having started a thread: Airflow calls this from its SIGTERM handler, where logging from
        this thread could deadlock (see ``SparkJobHook.on_kill``).
        """
        running = self._running
        if running is not None:
            reason = "the Airflow task asked to stop (task killed, marked failed or timed out)"
            threading.Thread(target=running.stop, args=(reason,), daemon=True).start()


@dataclasses.dataclass(frozen=True)
class RunningJob:
    """A job running in a thread of the task: how to stop it, the event its end sets, and the one ``stop`` sets when
    the job has not ended ``CANCEL_GRACE_SECONDS`` after the request (the task then stops waiting for it)."""

    cancellation: Cancellation
    ended: threading.Event
    unstopped: threading.Event = dataclasses.field(default_factory=threading.Event)

    def stop(self, reason: str) -> None:
        if not stop_job(self.cancellation, self.ended, reason):
            self.unstopped.set()


def stop_job(cancellation: Cancellation, ended: threading.Event, reason: str) -> bool:
    """Ask the running job to stop and wait until it has ``ended``, for at most ``CANCEL_GRACE_SECONDS``; return
    whether it did.

    Until the request has taken effect in the job's code, its operations are interrupted again: one it started after
    the request, between two of its steps, is stopped too. Not after: over Spark Connect every call is an operation,
    so the DROP of its cleanup would be interrupted as well.
    """
    cancellation.request(reason)
    ends = time.monotonic() + CANCEL_GRACE_SECONDS
    while not ended.wait(INTERRUPT_AGAIN_SECONDS):
        if time.monotonic() >= ends:
            return False
        if not cancellation.taken_effect:
            cancellation.interrupt_running()
    return True


def unstopped_error(master: str) -> str:
    """Why a task gave up waiting for its stopped job. The server ends an interrupted operation by interrupting the
    thread that runs it, and Hadoop's shell commands (a local folder's ``chmod``) can swallow that interrupt
    (SPARK-20301); the interrupt is not delivered twice, and a session's release does not cancel the Spark job of an
    operation that was interrupted already."""
    return (
        f"the Spark job did not stop within {CANCEL_GRACE_SECONDS} s of the request: the Spark Connect server {master} "
        "lost the interrupt of its running operation, which may run on there until it ends by itself; the session "
        "is released, and the task's next try undoes what the job left unfinished"
    )


def _with_session_seconds(result: JobResult, seconds: float) -> JobResult:
    return dataclasses.replace(result, session_seconds=seconds)
