"""The JVM jars the provider's jobs load, where ``scripts/setup.sh`` puts them: fetched from Maven Central with their
dependencies (``jvm/pom.xml`` declares each, with its version) into one folder of the Python environment that runs
Airflow, each jar named by its artifact without version (``postgresql.jar``). docker/Dockerfile fills the same
folder of its image; a connection's extra names another jar where a deployment keeps its own."""

from __future__ import annotations

import os
import sys

#: ``share/spark-tables/jars`` of the environment's prefix: a virtual environment's own, or the image's Python's.
JARS_FOLDER = os.path.join(sys.prefix, "share", "spark-tables", "jars")


def declared_jar(artifact: str) -> str:
    """The path of the jar of ``artifact`` (an artifactId of ``jvm/pom.xml``'s dependencies) in ``JARS_FOLDER``."""
    return os.path.join(JARS_FOLDER, f"{artifact}.jar")


#: PostgreSQL's JDBC driver (org.postgresql:postgresql): the Hive metastore's client and lookup tables' JDBC reads.
POSTGRES_JDBC_DRIVER = declared_jar("postgresql")
#: Spark's Kafka connector with the jars it needs beyond Spark's own: the jobs that read or write Kafka topics.
KAFKA_CONNECTOR_JARS = tuple(
    declared_jar(artifact)
    for artifact in (
        "spark-sql-kafka-0-10_2.13",
        "spark-token-provider-kafka-0-10_2.13",
        "kafka-clients",
        "commons-pool2",
    )
)
#: Hadoop's S3A file system with the AWS SDK modules it loads (not the SDK's bundle): every store on ``s3a://``. On a
#: JVM's class path from its start: a session made later in a running JVM does not find ``S3AFileSystem``.
S3A_JARS = tuple(
    declared_jar(artifact)
    for artifact in (
        "hadoop-aws",
        "analyticsaccelerator-s3",
        "s3",
        "s3-transfer-manager",
        "netty-nio-client",
        "apache-client",
        "sdk-core",
        "aws-core",
        "aws-xml-protocol",
        "aws-query-protocol",
        "protocol-core",
        "regions",
        "auth",
        "http-auth",
        "http-auth-aws",
        "http-auth-spi",
        "http-client-spi",
        "identity-spi",
        "checksums",
        "checksums-spi",
        "retries",
        "retries-spi",
        "profiles",
        "metrics-spi",
        "endpoints-spi",
        "json-utils",
        "utils",
        "arns",
        "third-party-jackson-core",
        "reactive-streams",
    )
)
