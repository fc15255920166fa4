"""Object storage without credentials fails naming the location and what would give the credentials."""

from __future__ import annotations

from collections.abc import Iterator

import fsspec
import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.storage_credentials import CredentialsMissing, missing_credentials, names_missing_credentials
from spark_tables.hooks.object_storage import s3_access_for
from spark_tables.jobs import files

PLAN_URI = "s3://pipelines/plans/shop_counts.json"  # the README's object-storage form


class NoCredentialsError(Exception):
    """Named as botocore's: the SDKs are told apart by their exceptions' class names."""


@pytest.fixture
def no_aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path) -> Iterator[None]:
    """A machine with no AWS credentials anywhere botocore looks (the instance metadata service not asked), and no
    S3 file system made before (fsspec keeps one made with other credentials and reuses it)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3 = fsspec.get_filesystem_class("s3")
    s3.clear_instance_cache()
    yield
    s3.clear_instance_cache()


def test_a_missing_credential_names_the_location_the_sources_and_where():
    err = missing_credentials("s3a://lake/orders", NoCredentialsError("Unable to locate credentials"), "on the moon")
    assert str(err) == (
        "cannot reach s3a://lake/orders: Unable to locate credentials: give AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials, an instance role) on the moon"
    )


def test_a_missing_credential_is_found_as_the_cause_of_another_error():
    try:
        try:
            raise NoCredentialsError("Unable to locate credentials")
        except NoCredentialsError as cause:
            raise OSError("listing failed") from cause
    except OSError as err:
        found = missing_credentials("gs://lake/x", err, "here")
    assert found is not None and "GOOGLE_APPLICATION_CREDENTIALS" in str(found)


def test_other_errors_pass_through_unchanged():
    @names_missing_credentials("here")
    def read(location: str) -> str:
        raise FileNotFoundError(location)

    with pytest.raises(FileNotFoundError):
        read("s3://lake/x")
    assert missing_credentials("s3://lake/x", PermissionError("Access Denied"), "here") is None


@pytest.mark.usefixtures("no_aws_credentials")
def test_the_spark_side_names_an_s3_uri_it_has_no_credentials_for():
    with pytest.raises(CredentialsMissing) as raised:
        files.write_text(PLAN_URI, "{}")  # through write_bytes: named once
    assert str(raised.value) == (
        f"cannot reach {PLAN_URI}: Unable to locate credentials: give AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "(or AWS_PROFILE, ~/.aws/credentials, an instance role) where the Spark job runs"
    )
    assert type(raised.value.__cause__).__name__ == "NoCredentialsError"


@pytest.mark.usefixtures("no_aws_credentials")
def test_the_airflow_side_names_an_s3_location_no_credentials_reach_before_any_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Amazon provider's file system reads a store without credentials anonymously (a public bucket's way), so
    the check before a job, which lists each bucket through the aws connection's client, is where they are missed:
    botocore refuses to sign the listing, before any request."""
    monkeypatch.delenv("AIRFLOW_CONN_AWS_DEFAULT", raising=False)
    with pytest.raises(SpecError) as refused:
        s3_access_for({"plan_uri": PLAN_URI})
    assert str(refused.value).startswith(f"{PLAN_URI}: no credentials for AWS S3 (connection 'aws_default'): give ")
