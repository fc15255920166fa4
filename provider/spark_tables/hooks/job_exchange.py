"""The files a task and its Spark driver exchange (``core.exchange`` names them): the spec file, the result, the
cancel and started markers, and a detached driver's log; the spec file only its owner reads.
"""

from __future__ import annotations

import contextlib
import json
import os

from airflow.sdk import ObjectStoragePath

from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import cancel_uri, local_path, log_uri, spec_uri, started_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.private_files import guard_shared_folder, write_private
from spark_tables.core.storage_credentials import reached_by_airflow
from spark_tables.hooks.object_storage import storage_path
from spark_tables.utils import settings


def write_private_file(path: ObjectStoragePath, text: str) -> None:
    """Write a file only its owner reads and no one else can swap, where the file system has permissions (a local
    one: ``core.private_files``); on object storage, the bucket's access rules decide."""
    local = local_path(str(path))
    if local is None:
        path.write_text(text)
        return
    guard_shared_folder(os.path.dirname(local))
    write_private(local, text)


@reached_by_airflow
def prepare_exchange(
    result_path: ObjectStoragePath, cancel_path: ObjectStoragePath, spec_file: tuple[ObjectStoragePath, str] | None
) -> None:
    """Clear what an earlier attempt of this try may have left, and write the spec file if the job has one."""
    for stale in (result_path, cancel_path):
        stale.unlink(missing_ok=True)
    if spec_file is not None:
        spec_path, spec_json = spec_file
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        write_private_file(spec_path, spec_json)


@reached_by_airflow
def take_result(path: ObjectStoragePath) -> JobResult | None:
    """Read the result the driver wrote and delete it; None if it wrote none."""
    if not path.exists():
        return None
    result = JobResult.from_json(path.read_text())
    path.unlink()
    return result


def read_launched_spec(result_uri: str) -> JobSpec | None:
    """The spec a durable job's driver was started with, left beside its result; None once its result is taken."""
    path = storage_path(spec_uri(result_uri))
    try:
        spec = JobSpec.from_json(path.read_text())
    except (FileNotFoundError, SpecError):
        return None
    return spec if spec.durable else None


def forget_launched_files(result_uri: str) -> None:
    """Remove what a durable job leaves beside its result: spec, cancel and started markers, and its log."""
    for leftover in (result_uri, cancel_uri(result_uri), spec_uri(result_uri), started_uri(result_uri)):
        storage_path(leftover).unlink(missing_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(driver_log_path(result_uri))


def driver_log_path(result_uri: str) -> str:
    """Where a detached driver's output goes: beside its result when the exchange is a local (or mounted) folder,
    else in ``[spark_tables] home``, on the machine that started it."""
    name = log_uri(result_uri)
    return local_path(name) or os.path.join(settings.home(), "drivers", os.path.basename(name))


def started_application(result_uri: str) -> str | None:
    """The application a durable job's driver said it started, if it did."""
    note = storage_path(started_uri(result_uri))
    try:
        return json.loads(note.read_text()).get("application_id")
    except (FileNotFoundError, ValueError, AttributeError):
        return None
