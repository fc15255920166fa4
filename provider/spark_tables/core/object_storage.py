"""S3-compatible object storage: which locations are on it, and how each side of a job is told to reach it.

One setting names a store for both sides: ``s3://bucket/path`` (or ``s3a://``), read on the Airflow side through
ObjectStoragePath and the Amazon provider's ``aws`` connection, on the Spark side through Hadoop's S3A (which
``S3Access.spark_conf`` has read ``s3://`` as it reads ``s3a://``) and, for the jobs' own files, s3fs.

A connection's keys reach the job only in the environment of its spark-submit (``AWS_ACCESS_KEY_ID`` and the other
variables every AWS SDK reads; S3A's default chain reads them too), never on a command line nor in the spec file:
the driver reads its spec from the exchange, which may itself be on S3. The driver hands them to its executors as
``spark.executorEnv.*``, which Spark's redaction hides. What is no secret (the endpoint, its region) is S3A's conf.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

#: The URI schemes of S3-compatible storage, as Airflow's and Hadoop's file systems spell them.
S3_SCHEMES = ("s3", "s3a", "s3n")
#: The environment variables of a connection's credentials and endpoint, as every AWS SDK reads them.
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
ENDPOINT_VARIABLE = "AWS_ENDPOINT_URL_S3"
REGION_VARIABLE = "AWS_REGION"
STORAGE_VARIABLES = (*CREDENTIAL_VARIABLES, ENDPOINT_VARIABLE, REGION_VARIABLE)
#: Spark's setting that hands an environment variable to every executor.
EXECUTOR_ENV = "spark.executorEnv."


def on_s3(location: Any) -> bool:
    """Whether ``location`` is a URI of S3-compatible storage."""
    return isinstance(location, str) and location.split("://", 1)[0].lower() in S3_SCHEMES and "://" in location


def bucket_of(location: str) -> str:
    """The bucket of an S3 URI."""
    return urlparse(location).netloc


def s3_locations(value: Any) -> Iterator[str]:
    """Every string inside ``value`` (a job spec's parts: dicts, lists, dataclasses as dicts) that is an S3 URI."""
    if on_s3(value):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from s3_locations(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from s3_locations(item)


@dataclass(frozen=True)
class S3Access:
    """How a job reaches S3: the connection's credentials (empty when it holds none: each side's own chain, an
    instance role say, finds them), its endpoint (None: AWS's own) and region."""

    credentials: Mapping[str, str] = field(default_factory=dict)
    endpoint: str | None = None
    region: str | None = None

    def environment(self) -> dict[str, str]:
        """The variables of spark-submit's environment: credentials, endpoint and region for every SDK."""
        variables = dict(self.credentials)
        if self.endpoint:
            variables[ENDPOINT_VARIABLE] = self.endpoint
        if self.region:
            variables[REGION_VARIABLE] = self.region
        return variables

    def spark_conf(self) -> dict[str, str]:
        """S3A's settings, none a secret: ``s3://`` read by S3A as ``s3a://`` is, and the endpoint, reached
        path-style (as an S3-compatible store's is, and as the jobs' own s3fs reaches it)."""
        conf = {
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        }
        if self.endpoint:
            conf |= {
                "spark.hadoop.fs.s3a.endpoint": self.endpoint,
                "spark.hadoop.fs.s3a.path.style.access": "true",
                "spark.hadoop.fs.s3a.connection.ssl.enabled": str(self.endpoint.startswith("https:")).lower(),
            }
        if self.region:
            conf["spark.hadoop.fs.s3a.endpoint.region"] = self.region
        return conf


def executor_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """Spark conf that hands the storage variables of ``environment`` (the driver's) on to the executors."""
    return {EXECUTOR_ENV + name: environment[name] for name in STORAGE_VARIABLES if environment.get(name)}


def s3fs_options(environment: Mapping[str, str]) -> dict[str, Any]:
    """s3fs's options where the job runs: botocore reads the credentials, endpoint and region from the environment
    itself; an endpoint of its own (an S3-compatible store's) is reached path-style, as S3A is told to."""
    return {"config_kwargs": {"s3": {"addressing_style": "path"}}} if environment.get(ENDPOINT_VARIABLE) else {}
