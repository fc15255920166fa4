"""Object storage whose credentials are missing, named: the location, and what would give the credentials.

fsspec's object stores (s3fs, gcsfs, adlfs) find their credentials where the code runs, and without them fail
with their SDK's own words ("NoCredentialsError: Unable to locate credentials"), naming neither the location nor a
way out. Every function of the file layers that reaches a location (``jobs/files.py`` on the Spark side, the hooks'
storage on the Airflow side) is wrapped by ``names_missing_credentials``, so the failure names both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from spark_tables.core.errors import JobError

P = ParamSpec("P")
R = TypeVar("R")

#: The SDKs' exceptions for credentials that are missing or incomplete, by class name (the SDKs are optional).
MISSING_CREDENTIALS = frozenset(
    {
        "NoCredentialsError",  # botocore (s3fs)
        "PartialCredentialsError",  # botocore
        "DefaultCredentialsError",  # google.auth (gcsfs)
        "CredentialUnavailableError",  # azure.identity (adlfs)
    }
)
#: What gives each store's SDK credentials, by URI scheme.
CREDENTIAL_SOURCES = {
    "s3": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials, an instance role)",
    "gs": "GOOGLE_APPLICATION_CREDENTIALS (or `gcloud auth application-default login`, a service account)",
    "abfs": "AZURE_STORAGE_CONNECTION_STRING (or AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY)",
}
_SCHEMES = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "az": "abfs", "abfss": "abfs"}


class CredentialsMissing(JobError):
    """Object storage refused a location for want of credentials: the message names it and what gives them."""


def missing_credentials(location: str, err: BaseException, where: str) -> CredentialsMissing | None:
    """The error to raise instead of ``err`` when ``err`` (or its cause) is an SDK's missing credentials; else None.

    ``where`` says where the credentials are looked for: "where the Spark driver runs", say.
    """
    cause: BaseException | None = err
    while cause is not None and type(cause).__name__ not in MISSING_CREDENTIALS:
        cause = cause.__cause__ or cause.__context__
    if cause is None:
        return None
    scheme = location.split("://", 1)[0].lower() if "://" in location else ""
    sources = CREDENTIAL_SOURCES.get(_SCHEMES.get(scheme, scheme), "the file system's credentials")
    detail = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return CredentialsMissing(f"cannot reach {location}: {detail}: give {sources} {where}")


def names_missing_credentials(where: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorates a function whose first argument is a location: missing credentials fail naming it (see above)."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def reaching(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return function(*args, **kwargs)
            except CredentialsMissing:
                raise  # named already, by a function this one called
            except Exception as err:
                missing = missing_credentials(str(args[0]), err, where) if args else None
                if missing is None:
                    raise
                raise missing from err

        return reaching

    return decorate


#: Marks a Spark-side function that reaches a location (its first argument).
reached_by_spark = names_missing_credentials("where the Spark job runs")
#: Marks an Airflow-side function that reaches a location (its first argument).
reached_by_airflow = names_missing_credentials("where the Airflow task runs")
