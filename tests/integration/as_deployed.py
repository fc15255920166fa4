"""Airflow and Spark as deployed: the one source of the settings that the tests' services (a Spark standalone
cluster, Airflow's components with the CeleryExecutor) and docker/compose.yaml share.

The tests start their services with these values; a test of docker/ checks that compose.yaml gives the same ones,
so what the tests show to work is what the compose file deploys. Only the hosts differ: loopback here, service
names in compose; and the Redis database, which is 0 in compose and one of the test session's own here (Redis is
shared by whatever runs tests on the machine).
"""

from __future__ import annotations

import json
from typing import Any

#: The Spark standalone cluster: a master and this many workers, each with these cores and memory.
SPARK_WORKERS = 2
SPARK_WORKER_CORES = 1
SPARK_WORKER_MEMORY = "1g"
#: Workers docker/ has besides: the core its Spark Connect server's application holds for as long as it runs, so
#: that ``SPARK_WORKERS`` tasks' applications still run at once beside it (the tests start their servers apart).
CONNECT_SERVER_WORKERS = 1
#: The master's settings (``SPARK_MASTER_OPTS``). An application that does not set ``spark.cores.max`` takes every
#: core of the cluster, so a second one, a parallel task's, would wait for the first to end: each application gets
#: one core (one executor of the default 1 GiB, which fits a worker) unless it asks for more, and two tasks run at
#: once. The REST submission server answers a driver's status (the master's JSON API lists applications).
SPARK_MASTER_CONF = {"spark.deploy.defaultCores": "1", "spark.master.rest.enabled": "true"}

#: What every Spark application is given (docker/spark-defaults.conf): one core, so that as many applications run at
#: once as the cluster has cores (the first does not take them all while the others wait), and an executor that fits
#: a worker's memory.
SPARK_APP_CONF = {"spark.cores.max": "1", "spark.executor.memory": "512m"}

#: The table formats the deployed catalog loads (its connection's extra ``table-formats``), and so its Spark Connect
#: server: Delta Lake, whose jars the image holds.
TABLE_FORMATS = ("delta",)

#: The Airflow components, each its own process (its own service in compose.yaml): the arguments of ``airflow``.
AIRFLOW_COMPONENTS = (("api-server",), ("scheduler",), ("dag-processor",), ("triggerer",), ("celery", "worker"))

#: The CeleryExecutor's queue of tasks: Redis, database 0.
CELERY_BROKER_DATABASE = 0
#: Tasks one Celery worker runs at once: enough for four consumers of one cached table and the task beside them.
CELERY_WORKER_CONCURRENCY = 4
#: Seconds the DAG processor gives a DAG file's processing, its task callbacks included, before it kills it (50 by
#: default). The provider's failure callbacks run a Spark application (the CTAS cleanup job), whose start alone took
#: longer than 50 s on a busy machine here: killed twice, the cleanup never ran.
DAG_FILE_PROCESSOR_TIMEOUT = 300


def java_options(conf: dict[str, str]) -> str:
    """Spark settings as the ``-D`` options of a daemon's ``SPARK_MASTER_OPTS`` or ``SPARK_WORKER_OPTS``."""
    return " ".join(f"-D{key}={value}" for key, value in conf.items())


def airflow_settings(
    *, api_server: str, redis: str, metadata_db: str, redis_database: int = CELERY_BROKER_DATABASE
) -> dict[str, str]:
    """The ``AIRFLOW__*`` settings every Airflow component gets, as deployed.

    ``api_server`` is ``host:port`` of the API server (which serves the Execution API the workers call),
    ``redis`` is ``host:port`` of the broker, ``metadata_db`` a SQLAlchemy URL of the PostgreSQL metadata database,
    ``redis_database`` the broker's Redis database.
    """
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__XCOM_BACKEND": "spark_tables.xcom.cache_registry.CacheRegistryXComBackend",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{api_server}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_db,
        "AIRFLOW__CELERY__BROKER_URL": f"redis://{redis}/{redis_database}",
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{metadata_db.replace('+psycopg2', '', 1)}",
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(CELERY_WORKER_CONCURRENCY),
        "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": str(DAG_FILE_PROCESSOR_TIMEOUT),
    }


def spark_connection(*, master: str) -> str:
    """``AIRFLOW_CONN_SPARK_DEFAULT``: the standalone master at ``master`` (``host:port``), drivers in client mode.

    Spark runs a Python application's driver only in client mode on a standalone master (spark-submit refuses
    cluster mode there), so the driver runs on the Airflow worker that runs the task.
    """
    return f"spark://{master}?deploy-mode=client"


def session_connection(*, server: str) -> str:
    """``AIRFLOW_CONN_SPARK_SESSION``: session mode's Spark Connect server at ``server`` (``host:port``), the Spark
    provider's ``spark_connect`` connection type as a URI."""
    return f"spark-connect://{server}"


def spark_tables_settings(*, shared: str) -> dict[str, str]:
    """The ``[spark_tables]`` settings: ``shared`` is a folder that Airflow's workers, the Spark drivers and the
    executors all see at this path (an NFS mount, a volume). The exchange, cache, lookup and checkpoint roots are
    under it, by default."""
    return {"AIRFLOW__SPARK_TABLES__HOME": shared}


def catalog_connection(
    *, host: str, port: int, user: str, password: str | None, database: str, warehouse: str
) -> dict[str, Any]:
    """``AIRFLOW_CONN_SPARK_TABLES_DEFAULT`` (as JSON): the PostgreSQL metastore, its warehouse on the shared folder,
    loading ``TABLE_FORMATS``."""
    connection: dict[str, Any] = {
        "conn_type": "spark_tables",
        "host": host,
        "port": port,
        "schema": database,
        "login": user,
        "extra": {"warehouse": warehouse, "table-formats": list(TABLE_FORMATS)},
    }
    if password is not None:
        connection["password"] = password
    return connection


def aws_connection(*, endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1") -> str:
    """``AIRFLOW_CONN_AWS_DEFAULT``: the Amazon provider's connection of the S3-compatible store at ``endpoint``,
    with its keys, as JSON."""
    extra = {"endpoint_url": endpoint, "region_name": region}
    return json.dumps({"conn_type": "aws", "login": access_key, "password": secret_key, "extra": extra})


def kafka_connection(*, servers: str) -> str:
    """``AIRFLOW_CONN_SPARK_TABLES_BUFFERED_KAFKA``: the Kafka provider's connection of the broker at ``servers``
    (``host:port``), as JSON."""
    return json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": servers}})
