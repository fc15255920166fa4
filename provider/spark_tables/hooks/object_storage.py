"""Object storage on the Airflow side: every location the provider reads or writes, as an ObjectStoragePath (S3's
through the ``[spark_tables] aws_conn_id`` connection), and what a job needs to reach S3, checked before its work.

The connection is the Amazon provider's: ``S3Hook`` reads its keys (or the role it assumes), its endpoint
(``endpoint_url`` in its extra, for an S3-compatible store) and region; ``core/object_storage.py`` says how the job
is told them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow.sdk import ObjectStoragePath

from spark_tables.core.errors import SpecError
from spark_tables.core.object_storage import S3Access, bucket_of, on_s3, s3_locations
from spark_tables.utils import settings

if TYPE_CHECKING:  # the Amazon provider is imported only where S3 is reached
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

#: S3's error codes for credentials it refuses, which a listing names (a HEAD's 403 names none).
REFUSED_CREDENTIALS = frozenset(
    {"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken", "InvalidToken", "403"}
)


def storage_path(location: str) -> ObjectStoragePath:
    """``location`` as an ObjectStoragePath; on S3 through the provider's aws connection."""
    return ObjectStoragePath(location, conn_id=settings.aws_conn_id() if on_s3(location) else None)


def _s3_hook() -> S3Hook:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    return S3Hook(aws_conn_id=settings.aws_conn_id())


def s3_access(hook: S3Hook | None = None) -> S3Access:
    """How a job reaches S3 through the aws connection (``hook``'s): its credentials only when it holds keys or
    assumes a role (otherwise the job's own chain finds them where it runs), its endpoint and region."""
    hook = hook or _s3_hook()
    config = hook.conn_config
    credentials: dict[str, str] = {}
    if config.aws_access_key_id or config.role_arn:
        frozen = hook.get_credentials()  # masks the secret and token in the task log
        credentials = {"AWS_ACCESS_KEY_ID": frozen.access_key, "AWS_SECRET_ACCESS_KEY": frozen.secret_key}
        if frozen.token:
            credentials["AWS_SESSION_TOKEN"] = frozen.token
    return S3Access(credentials=credentials, endpoint=config.get_service_endpoint_url("s3"), region=config.region_name)


def check_s3_locations(locations: Iterable[str], access: S3Access, hook: S3Hook) -> None:
    """Fail in one line, naming the first location of each bucket, when its bucket does not exist, the store refuses
    the credentials or cannot be reached: a listing of one key through ``hook``'s client, before any job work."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    through = f"connection {hook.aws_conn_id!r}" if hook.aws_conn_id else "this machine's own AWS credentials"
    store = access.endpoint or "AWS S3"
    client = hook.get_conn()
    checked: set[str] = set()
    for location in locations:
        bucket = bucket_of(location)
        if bucket in checked:
            continue
        checked.add(bucket)
        try:
            client.list_objects_v2(Bucket=bucket, MaxKeys=1)
        except ClientError as err:
            code = str(
                err.response.get("Error", {}).get("Code")
                or err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
            )
            if code == "NoSuchBucket":
                raise SpecError(
                    f"{location}: bucket {bucket!r} does not exist on {store} ({through}): create it, or correct "
                    "the setting that names it"
                ) from None
            if code in REFUSED_CREDENTIALS:
                raise SpecError(
                    f"{location}: {store} refuses the credentials of {through} ({code}): correct its keys, or "
                    "give them the right to list the bucket"
                ) from None
            raise SpecError(f"{location}: {store} answered {code or err} ({through})") from None
        except NoCredentialsError:
            raise SpecError(
                f"{location}: no credentials for {store} ({through}): give the connection its keys (login and "
                "password) or a role, or this machine AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            ) from None
        except BotoCoreError as err:
            raise SpecError(
                f"{location}: cannot reach {store} ({through}): {err}: start the store, or correct the "
                "connection's endpoint_url"
            ) from None


def s3_access_for(*parts: object) -> S3Access | None:
    """How a job reaches S3 when any location in ``parts`` (its spec's, its catalog's conf) is on it, its buckets
    checked first; None when none is."""
    locations = [location for part in parts for location in s3_locations(part)]
    if not locations:
        return None
    hook = _s3_hook()  # one connection lookup for both
    access = s3_access(hook)
    check_s3_locations(locations, access, hook)
    return access
