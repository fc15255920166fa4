"""A Spark Connect server on loopback, started from the pyspark installation in the venv (the server's jar ships in
the wheel) on ``local[2]``, with a catalog of the tests' own: the server of session mode's tests, once per test
session; or on the tests' standalone cluster, its executors on the cluster's workers, sized as every application
there (``as_deployed.SPARK_APP_CONF``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS, S3A_JARS
from spark_tables.core.private_files import write_private
from spark_tables.utils.metastore_schema import ensure_metastore_schema
from tests import s3
from tests.conftest import SPARK_SUBMIT_OPTIONS
from tests.integration.airflow_services import _free_port as free_port
from tests.integration.airflow_services import wait_for
from tests.integration.as_deployed import SPARK_APP_CONF

VENV_BIN = Path(sys.executable).parent
#: Seconds the server has to start and take connections (a JVM's start on a busy 2-core machine).
START_SECONDS = 180
#: Seconds it has to exit after SIGTERM before it is killed.
STOP_SECONDS = 20
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class SparkConnectServer:
    """A running Spark Connect server: one Spark application, whose sessions are the tasks' jobs."""

    def __init__(self, root: Path, catalog: PostgresMetastore, master: str = "local[2]") -> None:
        self.root = root
        self.catalog = catalog
        self.master = master
        self.port, self.ui_port = free_port(), free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connection(self) -> dict[str, Any]:
        """The Spark provider's ``spark_connect`` connection to it, as ``AIRFLOW_CONN_...`` takes it (JSON)."""
        return {"conn_type": "spark_connect", "host": "127.0.0.1", "port": self.port}

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def events(self) -> Path:
        """The server's event log folder."""
        return self.root / "events"

    def start(self) -> None:
        ensure_metastore_schema(self.catalog)
        self.events.mkdir(exist_ok=True)
        conf = {
            **self.catalog.spark_conf(),
            **s3.access().spark_conf(),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.port": str(self.ui_port),
            # What the server shows of its operations, for the tests that look for a secret there.
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": self.events.as_uri(),
            "spark.eventLog.compress": "false",
            "spark.log.level": "WARN",
            "spark.pyspark.python": self._workers_python(),
            **(SPARK_APP_CONF if self.master.startswith("spark://") else {}),
        }
        command = [str(VENV_BIN / "spark-submit"), "--master", self.master, "--class", SERVER_CLASS]
        command += ["--driver-class-path", self.catalog.driver_class_path]
        # its table formats', Spark's Kafka connector and S3A, as scripts/connect_server.py gives them
        command += ["--jars", ",".join([*self.catalog.jars, *KAFKA_CONNECTOR_JARS, *S3A_JARS])]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        # The metastore's password in a file of mode 600, as scripts/connect_server.py gives it: never a command line.
        properties = self.root / "secrets.conf"
        write_private(str(properties), "".join(f"{key} {value}\n" for key, value in self.catalog.secret_conf().items()))
        command += ["--properties-file", str(properties)]
        env = {
            **os.environ,
            **s3.access().environment(),  # the server's own keys to the tests' S3 server
            "PYSPARK_PYTHON": self._workers_python(),
            "SPARK_SUBMIT_OPTS": SPARK_SUBMIT_OPTIONS,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        with open(self.root / "server.log", "wb") as log:
            self._process = subprocess.Popen(
                [*command, "spark-internal"], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        wait_for("the Spark Connect server's port", self._listening, timeout=START_SECONDS)

    def _workers_python(self) -> str:
        """The Python of the server's workers (UDFs, ``mapInArrow``): this venv's, with its packages (pyspark,
        pyarrow, psycopg) but without this provider, as a server installed from stock Spark has none: the jobs ship
        its code to their sessions. ``-S`` skips the site-packages' ``.pth`` files, the provider's editable install."""
        python = self.root / "python-without-provider"
        if not python.exists():
            packages = sysconfig.get_paths()["purelib"]
            path = f'PYTHONPATH="{packages}${{PYTHONPATH:+:$PYTHONPATH}}"'
            python.write_text(f'#!/bin/sh\n{path} exec {sys.executable} -S "$@"\n')
            python.chmod(0o755)
        return str(python)

    def application_id(self) -> str:
        """The server's Spark application, as its UI's REST API names it."""
        [application] = self._rest("applications")
        return application["id"]

    def running_jobs(self) -> list[dict[str, Any]]:
        """The Spark jobs running in the server's application now."""
        return self._rest(f"applications/{self.application_id()}/jobs?status=running")

    def jobs_tagged(self, tag: str) -> list[dict[str, Any]]:
        """The Spark jobs of the server's application, running or done, whose operation a client tagged ``tag``
        (the server gives them the job tag ``SparkConnect_OperationTag_User_<user>_Session_<id>_Tag_<tag>``)."""
        jobs = self._rest(f"applications/{self.application_id()}/jobs")
        return [job for job in jobs if any(name.endswith(f"_Tag_{tag}") for name in job.get("jobTags", []))]

    def running_jobs_tagged(self, tag: str) -> list[dict[str, Any]]:
        """The Spark jobs running now whose operation a client tagged ``tag``."""
        return [job for job in self.jobs_tagged(tag) if job.get("status") == "RUNNING"]

    def stop(self) -> None:
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=STOP_SECONDS)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)  # its Python workers, if any outlived it
        self._process.wait()

    def _listening(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            tail = (self.root / "server.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"the Spark Connect server exited with {self._process.returncode}: {tail}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=2):
            return True
        return False

    def _rest(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/api/v1/{path}", timeout=10) as answer:
            return json.loads(answer.read())


@contextlib.contextmanager
def running_spark_connect_server(
    root: Path, catalog: PostgresMetastore, master: str = "local[2]"
) -> Iterator[SparkConnectServer]:
    server = SparkConnectServer(root, catalog, master)
    try:
        server.start()
        yield server
    finally:
        server.stop()
