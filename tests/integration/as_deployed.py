"""Airflow and Spark as deployed: the one source of the settings that the tests' services (a Spark standalone
cluster, Airflow's components with the CeleryExecutor) and docker/compose.yaml share.

The tests start their services with these values; a test of docker/ checks that compose.yaml gives the same ones,
so what the tests show to work is what the compose file deploys. Only the hosts differ: loopback here, service
names in compose.
"""

from __future__ import annotations

#: The Spark standalone cluster: a master and this many workers, each with these cores and memory.
SPARK_WORKERS = 2
SPARK_WORKER_CORES = 1
SPARK_WORKER_MEMORY = "1g"
#: The master's settings (``SPARK_MASTER_OPTS``). An application that does not set ``spark.cores.max`` takes every
#: core of the cluster, so a second one, a parallel task's, would wait for the first to end: each application gets
#: one core (one executor of the default 1 GiB, which fits a worker) unless it asks for more, and two tasks run at
#: once. The REST submission server answers a driver's status (the master's JSON API lists applications).
SPARK_MASTER_CONF = {"spark.deploy.defaultCores": "1", "spark.master.rest.enabled": "true"}

#: The CeleryExecutor's queue of tasks: Redis, database 0.
CELERY_BROKER_DATABASE = 0


def java_options(conf: dict[str, str]) -> str:
    """Spark settings as the ``-D`` options of a daemon's ``SPARK_MASTER_OPTS`` or ``SPARK_WORKER_OPTS``."""
    return " ".join(f"-D{key}={value}" for key, value in conf.items())


def airflow_settings(*, api_server: str, redis: str, metadata_db: str) -> dict[str, str]:
    """The ``AIRFLOW__*`` settings every Airflow component gets, as deployed.

    ``api_server`` is ``host:port`` of the API server (which serves the Execution API the workers call),
    ``redis`` is ``host:port`` of the broker, ``metadata_db`` a SQLAlchemy URL of the PostgreSQL metadata database.
    """
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__XCOM_BACKEND": "spark_tables.xcom.cache_registry.CacheRegistryXComBackend",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{api_server}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_db,
        "AIRFLOW__CELERY__BROKER_URL": f"redis://{redis}/{CELERY_BROKER_DATABASE}",
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{metadata_db.replace('+psycopg2', '', 1)}",
    }
