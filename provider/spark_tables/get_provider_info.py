"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from spark_tables import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-spark-tables",
        "name": "Spark Tables",
        "description": (
            "Flink-style table programs on Spark, run through spark-submit: CTAS with cleanup, cached tables "
            "across a DAG run's tasks, lookup joins with partial and full caches, compiled streaming plans with "
            "per-operator state TTL."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Spark Tables",
                "external-doc-url": "https://spark.apache.org/docs/latest/sql-ref.html",
                "tags": ["apache"],
            }
        ],
        "operators": [
            {
                "integration-name": "Spark Tables",
                "python-modules": [
                    "spark_tables.operators.spark_job",
                    "spark_tables.operators.sql",
                    "spark_tables.operators.ctas",
                    "spark_tables.operators.cache",
                    "spark_tables.operators.lookup",
                    "spark_tables.operators.plan",
                    "spark_tables.operators.streaming",
                    "spark_tables.operators.aggregation",
                    "spark_tables.operators.links",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": "Spark Tables",
                "python-modules": [
                    "spark_tables.hooks.spark_job",
                    "spark_tables.hooks.catalog",
                    "spark_tables.hooks.lookup.tables",
                    "spark_tables.hooks.plan",
                ],
            }
        ],
        "sensors": [
            {"integration-name": "Spark Tables", "python-modules": ["spark_tables.sensors.lookup_reload"]},
        ],
        # The trigger a task waiting for a cached table's copy defers to (single flight).
        "triggers": [
            {"integration-name": "Spark Tables", "python-modules": ["spark_tables.triggers.cached_table"]},
        ],
        # The extra links of every Spark job task; the monitoring pages themselves are the plugin of the
        # airflow.plugins entry point (plugins listed here load only with [core] lazy_discover_providers off).
        "extra-links": [
            "spark_tables.operators.links.SparkJobTabLink",
            "spark_tables.operators.links.SparkApplicationLink",
        ],
        "connection-types": [
            {
                "connection-type": "spark_tables",
                "hook-class-name": "spark_tables.hooks.catalog.SparkTablesCatalogHook",
                "hook-name": "Spark Tables catalog",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Metastore database"},
                    "placeholders": {
                        "host": "PostgreSQL host of the Hive metastore; empty = embedded Derby catalog",
                        "schema": "spark_tables_metastore",
                        "login": "postgres",
                        "extra": (
                            '{"warehouse": "s3a://bucket/warehouse", "jdbc-driver-jar": "/opt/jars/postgresql.jar"}'
                        ),
                    },
                },
            }
        ],
        "config": {
            "spark_tables": {
                "description": (
                    "Where the Spark Tables provider keeps its embedded catalog, job code, job results and "
                    "cached tables."
                ),
                "options": {
                    "home": {
                        "description": (
                            "Folder of the embedded catalog (Derby metastore and warehouse), the packaged job "
                            "code and job results. Default: spark_tables under AIRFLOW_HOME."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/data/spark_tables",
                        "default": None,
                    },
                    "cache_uri": {
                        "description": (
                            "URI under which cached tables' copies are written, a folder per DAG run. Airflow and "
                            "every Spark node must reach it (hdfs://, s3a://). Default: cache under home."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3a://bucket/spark_tables/cache",
                        "default": None,
                    },
                    "cache_quota": {
                        "description": (
                            "Bytes all copies under cache_uri may take (800 MB, 10 GiB); past it the least recently "
                            "used copies are evicted, and computed again by their next reader. Default: no limit."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "50 GiB",
                        "default": None,
                    },
                    "cache_memory_quota": {
                        "description": (
                            "Bytes the copies kept in one Spark Connect server's memory may take (session mode); "
                            "past it the least recently used are released there, and computed again by their next "
                            "reader. Default: no limit."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "2 GiB",
                        "default": None,
                    },
                    "cache_wait_timeout": {
                        "description": (
                            "How long a task waits, deferred, for the copy of a cached table another task of its DAG "
                            "run computes (single flight); past it, the task computes the table itself."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "2 h",
                        "default": "1 h",
                    },
                    "cache_wait_check_interval": {
                        "description": (
                            "While a task waits for the copy of a cached table another task computes: how often it "
                            "asks Airflow whether that task still runs, and takes over if it was lost."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "30 s",
                        "default": "1 min",
                    },
                    "lookup_uri": {
                        "description": (
                            "URI under which lookup tables' full-cache snapshots are written, a folder per lookup "
                            "table shared by every DAG that reads or reloads it. Airflow and every Spark node must "
                            "reach it. Default: lookup under home."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3a://bucket/spark_tables/lookup",
                        "default": None,
                    },
                    "checkpoint_uri": {
                        "description": (
                            "URI under which executed compiled plans keep their streaming checkpoints, a folder per "
                            "plan, so that each run resumes where the last one ended. Spark's driver and executors "
                            "must reach it (hdfs://, s3a://). Default: checkpoints under home."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3a://bucket/spark_tables/checkpoints",
                        "default": None,
                    },
                    "jvm_class_archive": {
                        "description": (
                            "Folder of the class-data archive local Spark drivers share to start faster (Java "
                            "AppCDS), or off. Default: jvm under home."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "off",
                        "default": None,
                    },
                    "aws_conn_id": {
                        "description": (
                            "The aws connection (Amazon provider) through which Airflow and the jobs reach stores on "
                            "s3:// or s3a:// (warehouse, cache, lookup, checkpoint and exchange roots): its keys or "
                            "role, endpoint (extra endpoint_url, for an S3-compatible store) and region. Its keys "
                            "reach spark-submit in its environment, never a command line. Empty: each side's own "
                            "credentials (an instance role, AWS_* variables). A missing connection is the same."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "minio",
                        "default": "aws_default",
                    },
                    "exchange_uri": {
                        "description": (
                            "URI under which Spark drivers write job results for Airflow to read. In cluster "
                            "deploy mode, use storage both reach (hdfs://, s3://). Default: exchange under home."
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3://bucket/spark_tables/exchange",
                        "default": None,
                    },
                },
            }
        },
    }
