"""Folders a job's executors must share with its driver, checked at the job's start on a cluster.

Executors write cached tables' copies, lookup snapshots, streaming checkpoints' state and lookup metrics; the
driver commits, reads and publishes them. On local Spark they are one machine's folders; on a cluster a local folder
of the driver's machine is another folder on each executor's, and jobs would write copies the driver never sees,
state it never finds, metrics of zero. So before the job's work, on a master that is not local, one executor writes a
small file in each local folder the job uses and the driver looks for it: one one-task Spark job, whose Python worker
the jobs that use these folders start anyway. Folders on object storage are shared by nature and not probed.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark_tables.core.errors import JobError
from spark_tables.core.exchange import local_path
from spark_tables.jobs import files

#: The name of a probe file in a probed folder, before its token: hidden, a file and not a folder, so no listing of
#: the folder's tables, runs or plans meets it while it is there.
PROBE_PREFIX = ".spark_tables_probe-"


def check_shared_folders(spark: SparkSession, folders: Mapping[str, str]) -> None:
    """Raise ``JobError``, naming each setting, if an executor cannot write in one of ``folders`` (setting name to
    folder URI) or writes where the driver does not see it. Does nothing on a local master."""
    probed = {setting: uri for setting, uri in folders.items() if local_path(uri) is not None}
    if not probed or spark.conf.get("spark.master", "local").startswith("local"):
        return
    token = uuid.uuid4().hex
    probes = {setting: f"{uri.rstrip('/')}/{PROBE_PREFIX}{token}" for setting, uri in probed.items()}
    write_probes = F.udf(_write_probes, "string")
    [row] = spark.range(1, numPartitions=1).select(write_probes(F.lit(json.dumps(probes)))).collect()
    written = json.loads(row[0])
    problems = []
    for setting, probe in probes.items():
        host, error = written[setting]["host"], written[setting]["error"]
        if error:
            problems.append(f"{setting} {probed[setting]}: an executor on {host} cannot write there ({error})")
        elif not files.exists(probe):
            problems.append(
                f"{setting} {probed[setting]} is not shared: the driver on {socket.gethostname()} does not see the "
                f"file an executor on {host} wrote there"
            )
        else:
            files.remove(probe)
    if problems:
        raise JobError(
            "; ".join(problems) + ": put it on a folder every Spark node and the Airflow workers mount at the same "
            "path (NFS, say), or on object storage"
        )


def _write_probes(probes: str) -> str:
    """On an executor: write each probe file; by setting, the executor's host and any error."""
    report = {}
    for setting, probe in json.loads(probes).items():
        error = None
        try:
            files.write_text(probe, f"{socket.gethostname()} {os.getpid()}")
        except OSError as err:
            error = str(err)
        report[setting] = {"host": socket.gethostname(), "error": error}
    return json.dumps(report)
