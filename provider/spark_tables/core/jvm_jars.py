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
