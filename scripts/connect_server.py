"""Starts and stops a Spark Connect server for session mode in this repository's setup: the venv's pyspark (the
server's jar ships in the wheel) on ``local[2]``, listening on a free port of 127.0.0.1, on the catalog of a
``spark_tables`` connection, ``spark_tables_default`` by default (the embedded catalog's Derby metastore under the
provider's home when it does not exist, as for the operators).
Run it through ``scripts/connect_server.sh``, which sets the repository's Airflow up first (as scripts/airflow.sh)::

    bash scripts/connect_server.sh start [--catalog CONN_ID] [--log PATH]   # prints the spark_connect connection
    bash scripts/connect_server.sh stop                                     # stops the server start started

``start`` prints the server's ``spark_connect`` connection as JSON, for ``AIRFLOW_CONN_<ID>``, once it listens, and
fails in one line (exit 1) if one runs already, or it exits or does not listen within three minutes (its log says
why: ``$AIRFLOW_HOME/connect-server.log`` unless ``--log`` says otherwise). A PostgreSQL metastore's schema is made
first, if it has none; its password reaches Spark in a properties file only this user reads, never a command line.
The server reaches S3 through the ``[spark_tables] aws_conn_id`` connection (``aws_default``), its keys in the
server's environment.
The embedded Derby metastore admits one application at a time: while the server runs, per-job tasks on the embedded
default fail, naming it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from spark_tables.core.catalog_config import Catalog, PostgresMetastore
from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS, S3A_JARS
from spark_tables.core.private_files import private_folder, write_private
from spark_tables.hooks.catalog import SparkTablesCatalogHook
from spark_tables.hooks.object_storage import s3_access
from spark_tables.utils import settings
from spark_tables.utils.metastore_schema import ensure_metastore_schema

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_SECONDS = 180
STOP_SECONDS = 30


def pid_file() -> Path:
    return Path(settings.home()) / "connect-server.pid"


def start(log: Path, catalog: Catalog) -> str:
    """Start the server on ``catalog``; its connection, once it listens."""
    if _running() is not None:
        raise SystemExit(f"error: a Spark Connect server started here runs already (pid {_running()}): stop it first")
    if isinstance(catalog, PostgresMetastore):
        ensure_metastore_schema(catalog)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    s3 = s3_access()  # the aws connection's: the server's own keys, in its environment
    conf = {
        **catalog.spark_conf(),
        **s3.spark_conf(),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.log.level": "WARN",
        "spark.pyspark.python": sys.executable,
    }
    pid_file().parent.mkdir(parents=True, exist_ok=True)  # before the server starts: ``stop`` must find it
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--class", SERVER_CLASS]
    command += [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    if catalog.driver_class_path:
        command += ["--driver-class-path", catalog.driver_class_path]
    # its table formats' (Delta Lake's), Spark's Kafka connector, which session mode's jobs reading Kafka topics need
    # on the server's class path, for the server's driver and executors, and S3A, for stores on s3:// and s3a://
    command += ["--jars", ",".join([*catalog.jars, *KAFKA_CONNECTOR_JARS, *S3A_JARS])]
    if secrets := catalog.secret_conf():  # the metastore's password: a file of this user's, no command line
        properties = os.path.join(private_folder(os.path.join(settings.home(), "private")), "connect-server.conf")
        write_private(properties, "".join(f"{key} {value}\n" for key, value in secrets.items()))
        command += ["--properties-file", properties]
    env = {
        **os.environ,
        **s3.environment(),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # spark-submit finds pyspark
    }
    with open(log, "wb") as output:
        server = subprocess.Popen(
            [*command, "spark-internal"], env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    pid_file().write_text(str(server.pid))
    deadline = time.monotonic() + START_SECONDS
    while server.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
            return json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port})
        time.sleep(0.5)
    stop()
    raise SystemExit(f"error: the Spark Connect server did not start listening on 127.0.0.1:{port}: see {log}")


def stop() -> None:
    """Stop the server ``start`` started, and every process of its session; nothing when none runs."""
    pid = _running()
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_SECONDS
            while time.monotonic() < deadline:
                os.killpg(pid, 0)  # raises ProcessLookupError once the group is gone
                time.sleep(0.2)
            os.killpg(pid, signal.SIGKILL)
    pid_file().unlink(missing_ok=True)


def _running() -> int | None:
    """The pid of the server ``start`` started, while its process group lives."""
    try:
        pid = int(pid_file().read_text())
        os.killpg(pid, 0)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    return pid


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="scripts/connect_server.sh", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    starting = commands.add_parser("start", help="start a server; print its spark_connect connection (JSON)")
    starting.add_argument(
        "--catalog",
        metavar="CONN_ID",
        default="spark_tables_default",
        help="a spark_tables connection (by default "
        "spark_tables_default, the embedded catalog when it does not exist, as for the operators)",
    )
    starting.add_argument("--log", type=Path, help="the server's log (default: $AIRFLOW_HOME/connect-server.log)")
    commands.add_parser("stop", help="stop the server start started")
    args = parser.parse_args(argv)
    if args.command == "stop":
        stop()
        return
    connection_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # standard output is the connection alone: anything else written there (log lines) goes to stderr
    catalog = SparkTablesCatalogHook(catalog_conn_id=args.catalog).get_catalog()
    print(start(args.log or Path(os.environ["AIRFLOW_HOME"]) / "connect-server.log", catalog), file=connection_out)


if __name__ == "__main__":
    main(sys.argv[1:])
