"""docker/: compose.yaml is valid, and deploys what the tests run (tests/integration/as_deployed.py).

There is no Docker daemon here: ``docker-compose config`` (Debian's docker-compose, which scripts/test.sh installs)
validates the file and resolves its anchors and defaults without one, and the tests read what it resolved. Hosts
are service names there, loopback in the tests; every other value must be the same.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.requirements import Requirement

from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.core.jvm_jars import JARS_FOLDER, KAFKA_CONNECTOR_JARS, S3A_JARS
from spark_tables.core.object_storage import S3Access
from tests.integration import as_deployed
from tests.unit.test_docs_generated import _generator

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DOCKER_COMPOSE = os.environ.get("SPARK_TABLES_TEST_DOCKER_COMPOSE", "/usr/bin/docker-compose")
#: Where compose.yaml puts what the tests run on loopback.
API_SERVER, REDIS, POSTGRES, SPARK_MASTER = "airflow-apiserver:8080", "redis:6379", "postgres:5432", "spark-master:7077"
SPARK_CONNECT = "spark-connect:15002"
KAFKA = "kafka:9092"
S3 = "http://s3:8333"
SHARED = "/opt/spark_tables"
METASTORE_DATABASE = "metastore"
#: The metastore's own PostgreSQL role (docker/postgres-init.sh), not the superuser that owns Airflow's database.
METASTORE_ROLE = "metastore"


#: What docker/.env must set: compose.yaml gives none of them a default.
REQUIRED = {
    "POSTGRES_PASSWORD": "postgres-secret",
    "METASTORE_PASSWORD": "metastore-secret",
    "AIRFLOW_ADMIN_PASSWORD": "admin-secret",
    "AIRFLOW_JWT_SECRET": "jwt-secret",
    "AIRFLOW_API_SECRET_KEY": "api-secret",
    "AIRFLOW_FERNET_KEY": "fernet-key",
    "S3_ACCESS_KEY": "s3-access-key",
    "S3_SECRET_KEY": "s3-secret-key",
}


def _run_config(compose: Path, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [DOCKER_COMPOSE, "--file", str(compose), "config"],
            env={"PATH": os.environ.get("PATH", ""), **variables},
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        pytest.fail(
            f"{DOCKER_COMPOSE} is missing: run 'apt-get install docker-compose' as root (scripts/test.sh does), "
            "or set SPARK_TABLES_TEST_DOCKER_COMPOSE"
        )


def _config(compose: Path, **variables: str) -> dict[str, Any]:
    """``compose`` as ``docker-compose config`` validates and resolves it, with docker/.env's required settings
    (``REQUIRED``, or ``variables``) and the defaults it gives the others."""
    done = _run_config(compose, {**REQUIRED, **variables})
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return _config(DOCKER / "compose.yaml")


@pytest.fixture(scope="module")
def services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return config["services"]


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", "")
    return command if isinstance(command, str) else " ".join(command)


def _spark(services: dict[str, dict[str, Any]], main_class: str) -> dict[str, dict[str, Any]]:
    return {
        name: s for name, s in services.items() if f"spark-class org.apache.spark.deploy.{main_class}" in _command(s)
    }


def _of_the_image(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The services that run the image docker/Dockerfile builds: Airflow's and Spark's."""
    return {name: s for name, s in services.items() if "build" in s}


def _airflow(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    spark = ("spark-class", "spark-submit")
    return {name: s for name, s in _of_the_image(services).items() if not any(w in _command(s) for w in spark)}


def _mounts(service: dict[str, Any]) -> dict[str, str]:
    """Target to source of a service's volumes."""
    return {target: source for source, target, *_ in (volume.split(":") for volume in service.get("volumes", []))}


def _metadata_db(services: dict[str, dict[str, Any]]) -> str:
    postgres = services[POSTGRES.split(":")[0]]["environment"]
    return (
        f"postgresql+psycopg2://{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@{POSTGRES}/"
        f"{postgres['POSTGRES_DB']}"
    )


def _metastore(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The catalog's PostgreSQL metastore in compose: host, port, its own role and password, database and warehouse."""
    postgres = services[POSTGRES.split(":")[0]]["environment"]
    return {
        "host": POSTGRES.split(":")[0],
        "port": int(POSTGRES.split(":")[1]),
        "user": METASTORE_ROLE,
        "password": postgres["METASTORE_PASSWORD"],
        "database": METASTORE_DATABASE,
        "warehouse": f"{SHARED}/warehouse",
    }


def test_compose_validates_and_a_broken_copy_does_not(config: dict[str, Any], tmp_path: Path) -> None:
    assert "airflow-worker" in config["services"] and "spark-tables" in config["volumes"]
    assert config["services"]["postgres"]["environment"]["METASTORE_PASSWORD"] == REQUIRED["METASTORE_PASSWORD"]
    text = (DOCKER / "compose.yaml").read_text()
    assert "service_completed_successfully" in text
    broken = tmp_path / "compose.yaml"
    broken.write_text(text.replace("service_completed_successfully", "service_done"))
    with pytest.raises(AssertionError, match="service_done"):
        _config(broken)


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_every_secret_must_be_set_none_has_a_default(missing: str) -> None:
    """A password or key compose defaulted would be the same on every try-out, and known to anyone who read it."""
    done = _run_config(DOCKER / "compose.yaml", {k: v for k, v in REQUIRED.items() if k != missing})
    assert done.returncode != 0
    assert f"{missing} is required, set it in docker/.env" in done.stderr


def test_only_airflow_s_ui_is_published_on_every_interface(services: dict[str, dict[str, Any]]) -> None:
    """Spark Connect asks for no credentials and the master's UI can kill applications: neither on a public
    interface."""
    published = {(name, *_published(port)) for name, service in services.items() for port in service.get("ports", [])}
    assert published == {
        (API_SERVER.split(":")[0], "0.0.0.0", int(API_SERVER.split(":")[1])),
        (SPARK_MASTER.split(":")[0], "127.0.0.1", 8080),
    }


def _published(port: str | dict[str, Any]) -> tuple[str, int]:
    """The host address and container port of a published port, in either form ``config`` writes."""
    if isinstance(port, dict):
        return port.get("host_ip", "0.0.0.0"), int(port["target"])
    *host, _, target = port.split("/")[0].split(":")
    return (host[0] if host else "0.0.0.0"), int(target)


def test_every_airflow_component_the_tests_run_is_a_service(services: dict[str, dict[str, Any]]) -> None:
    commands = [_command(service) for service in _airflow(services).values()]
    for component in as_deployed.AIRFLOW_COMPONENTS:
        assert commands.count(" ".join(component)) == 1, f"airflow {' '.join(component)}: not one service"
    api_server = services[API_SERVER.split(":")[0]]
    assert _command(api_server) == "api-server"  # on its default port, which it publishes
    assert [port["target"] for port in api_server["ports"]] == [int(API_SERVER.split(":")[1])]


def test_every_airflow_service_has_the_tests_settings(services: dict[str, dict[str, Any]]) -> None:
    expected = {
        **as_deployed.airflow_settings(api_server=API_SERVER, redis=REDIS, metadata_db=_metadata_db(services)),
        **as_deployed.spark_tables_settings(shared=SHARED),
        "AIRFLOW_CONN_SPARK_DEFAULT": as_deployed.spark_connection(master=SPARK_MASTER),
        "AIRFLOW_CONN_SPARK_SESSION": as_deployed.session_connection(server=SPARK_CONNECT),
    }
    catalog = as_deployed.catalog_connection(**_metastore(services))
    airflow = _airflow(services)
    assert set(airflow) >= {"airflow-init", "airflow-apiserver", "airflow-worker"}
    for name, service in airflow.items():
        environment = service["environment"]
        different = {
            key: (environment.get(key), value) for key, value in expected.items() if environment.get(key) != value
        }
        assert different == {}, f"{name}: settings unlike the tests' (compose's, the tests')"
        assert json.loads(environment["AIRFLOW_CONN_SPARK_TABLES_DEFAULT"]) == catalog, name


def test_the_brokers_and_databases_are_services(services: dict[str, dict[str, Any]]) -> None:
    """Redis and PostgreSQL at the hosts the settings name, with every database a connection names."""
    assert REDIS.split(":")[0] in services and POSTGRES.split(":")[0] in services
    postgres = services[POSTGRES.split(":")[0]]
    init_scripts = [
        Path(source)
        for target, source in _mounts(postgres).items()
        if target.startswith("/docker-entrypoint-initdb.d/")
    ]
    created = {postgres["environment"]["POSTGRES_DB"]} | {
        name for script in init_scripts for name in re.findall(r"CREATE DATABASE (\w+)", script.read_text())
    }
    assert [script.name for script in init_scripts] == ["postgres-init.sh"]
    named = {METASTORE_DATABASE}
    for service in _airflow(services).values():
        for key, value in service["environment"].items():
            if key.startswith("AIRFLOW_CONN_") and value.startswith("postgres://"):
                assert urlsplit(value).netloc.endswith(f"@{POSTGRES}"), key
                named.add(urlsplit(value).path.lstrip("/"))
    assert named <= created, f"databases no init script creates: {named - created}"


def _kafka_broker_script() -> Any:
    """scripts/kafka_broker.py as a module, importing its sibling as it does when run (its folder on sys.path)."""
    scripts = str(ROOT / "scripts")
    spec = importlib.util.spec_from_file_location("kafka_broker", ROOT / "scripts" / "kafka_broker.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, scripts)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(scripts)
    return module


#: The broker's settings that name its hosts, ports and folders: loopback's and free ports' in the tests, the
#: service's in compose (checked apart).
_BROKER_PLACES = ("controller.quorum.voters", "listeners", "advertised.listeners", "log.dirs")


def test_the_kafka_broker_is_the_tests_one(services: dict[str, dict[str, Any]]) -> None:
    """Kafka's image of the tests' broker's version, set as scripts/kafka_broker.py sets that broker, at the address
    of the Airflow services' Kafka connection; published nowhere."""
    broker = services[KAFKA.split(":")[0]]
    pom = (ROOT / "jvm" / "kafka-broker" / "pom.xml").read_text()
    version = re.search(r"<artifactId>kafka_2\.13</artifactId>\s*<version>([^<]+)</version>", pom).group(1)
    assert broker["image"] == f"apache/kafka:{version}"
    tests = dict(
        line.split("=", 1)
        for line in _kafka_broker_script().server_properties(Path("/data"), 9092, 9093).splitlines()
        if line
    )
    compose = {
        key.removeprefix("KAFKA_").lower().replace("_", "."): str(value)
        for key, value in broker["environment"].items()
        if key.startswith("KAFKA_")
    }
    shared = {key: value for key, value in tests.items() if key not in _BROKER_PLACES}
    assert {key: compose.get(key) for key in shared} == shared
    assert compose["advertised.listeners"] == f"PLAINTEXT://{KAFKA}"
    assert compose["controller.quorum.voters"] == f"1@{KAFKA.split(':')[0]}:9093"
    assert "ports" not in broker
    for name, service in _airflow(services).items():
        connection = service["environment"]["AIRFLOW_CONN_SPARK_TABLES_BUFFERED_KAFKA"]
        assert json.loads(connection) == json.loads(as_deployed.kafka_connection(servers=KAFKA)), name


def test_the_spark_cluster_is_the_tests_one(services: dict[str, dict[str, Any]]) -> None:
    masters, workers = _spark(services, "master.Master"), _spark(services, "worker.Worker")
    assert list(masters) == [SPARK_MASTER.split(":")[0]]
    assert len(workers) == as_deployed.SPARK_WORKERS + as_deployed.CONNECT_SERVER_WORKERS
    for name, worker in workers.items():
        assert _command(worker).endswith(f"worker.Worker spark://{SPARK_MASTER}"), name
        assert worker["environment"]["SPARK_WORKER_CORES"] == str(as_deployed.SPARK_WORKER_CORES), name
        assert worker["environment"]["SPARK_WORKER_MEMORY"] == as_deployed.SPARK_WORKER_MEMORY, name


def test_the_spark_connect_server_runs_on_the_cluster_on_the_catalogs_metastore_its_password_in_no_command(
    services: dict[str, dict[str, Any]],
) -> None:
    """The server of AIRFLOW_CONN_SPARK_SESSION: on the master, listening where the connection says, with the Spark
    settings the spark_tables connection gives per-job jobs (the password in a properties file made from the
    environment), sized by spark-defaults.conf, after airflow-init has made the metastore's schema."""
    server_name = SPARK_CONNECT.split(":")[0]
    server = services[server_name]
    command = _command(server)
    assert "org.apache.spark.sql.connect.service.SparkConnectServer" in command
    assert f"--master spark://{SPARK_MASTER} " in command
    settings = dict(re.findall(r"--conf (\S+?)=(\S+)", command))
    catalog = PostgresMetastore(**_metastore(services), table_formats=as_deployed.TABLE_FORMATS)
    s3 = S3Access(endpoint=S3, region="us-east-1").spark_conf()
    assert settings == {**catalog.spark_conf(), **s3, "spark.connect.grpc.binding.port": SPARK_CONNECT.split(":")[1]}

    # The driver, the table formats' jars, Spark's Kafka connector and S3A's jars the provider names (their paths
    # under the virtual environment), in the image's environment, as the tests' server has them.
    def in_the_image(jar: str) -> str:
        return "$$VIRTUAL_ENV/" + os.path.relpath(jar, sys.prefix)

    assert f'--driver-class-path "{in_the_image(catalog.jdbc_driver_jar)}" ' in command
    assert f'--jars "{",".join(map(in_the_image, [*catalog.jars, *KAFKA_CONNECTOR_JARS, *S3A_JARS]))}" ' in command
    [(password_key, _)] = catalog.secret_conf().items()
    assert f'echo "{password_key} $$METASTORE_PASSWORD" >> "$$properties"' in command
    assert 'cat /opt/spark-conf/spark-defaults.conf > "$$properties"' in command
    assert _mounts(server)["/opt/spark-conf/spark-defaults.conf"] == str(DOCKER / "spark-defaults.conf")
    password = "only-in-the-environment"
    with_password = _config(DOCKER / "compose.yaml", METASTORE_PASSWORD=password)["services"][server_name]
    assert password not in _command(with_password) and with_password["environment"]["METASTORE_PASSWORD"] == password
    assert "POSTGRES_PASSWORD" not in with_password["environment"], "the server never gets the superuser's password"
    keys = _config(DOCKER / "compose.yaml", S3_SECRET_KEY="s3-only-in-the-environment")["services"][server_name]
    assert "s3-only-in-the-environment" not in _command(keys)
    assert keys["environment"]["AWS_SECRET_ACCESS_KEY"] == "s3-only-in-the-environment"
    assert server["expose"] == [SPARK_CONNECT.split(":")[1]] and "ports" not in server
    assert server["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert "ensure_metastore_schema(" in _command(services["airflow-init"])


def test_the_session_connection_is_one_of_session_mode_on_that_server(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_tables.hooks.spark_connect_job import ConnectServer, connects_to_server

    monkeypatch.setenv(
        "AIRFLOW_CONN_SPARK_SESSION", services["airflow-worker"]["environment"]["AIRFLOW_CONN_SPARK_SESSION"]
    )
    assert connects_to_server("spark_session")
    assert ConnectServer.of("spark_session").master == f"sc://{SPARK_CONNECT}"


def test_every_application_gets_the_tests_spark_conf(services: dict[str, dict[str, Any]]) -> None:
    for name, service in _airflow(services).items():
        defaults = Path(_mounts(service)[service["environment"]["SPARK_CONF_DIR"] + "/spark-defaults.conf"])
        lines = [line.split(None, 1) for line in defaults.read_text().splitlines() if line and line[0] != "#"]
        assert {key: value.strip() for key, value in lines} == as_deployed.SPARK_APP_CONF, name


def test_airflow_and_spark_share_the_image_and_one_volume_at_one_path(config: dict[str, Any]) -> None:
    services = config["services"]
    of_the_image = _of_the_image(services)
    assert set(_spark(services, "")) < set(of_the_image) and set(_airflow(services)) < set(of_the_image)
    assert {(s["build"]["context"], s["build"]["dockerfile"], s["image"]) for s in of_the_image.values()} == {
        (str(ROOT), "docker/Dockerfile", of_the_image["airflow-worker"]["image"])
    }
    shared = {name: _mounts(service).get(SHARED) for name, service in of_the_image.items()}
    [volume] = set(shared.values())
    assert volume in config["volumes"], shared  # a named volume, the same in every container


def test_the_dockerfile_installs_what_the_tests_run() -> None:
    """Airflow, Python, the pyspark pair, the Celery provider and Celery of the image are pyproject.toml's and this
    venv's."""
    arguments = dict(re.findall(r"^ARG (\w+)=(\S+)$", (DOCKER / "Dockerfile").read_text(), re.MULTILINE))
    image = re.fullmatch(
        r"apache/airflow:(?:slim-)?(?P<airflow>[\d.]+)-python(?P<python>[\d.]+)", arguments["AIRFLOW_IMAGE"]
    )
    assert image, arguments["AIRFLOW_IMAGE"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {
        Requirement(r).name: Requirement(r).specifier
        for r in project["dependencies"] + project["optional-dependencies"]["test"]
    }
    assert (
        image["airflow"] == importlib.metadata.version("apache-airflow")
        and image["airflow"] in pinned["apache-airflow"]
    )
    assert f"{image['python']}.0" in Requirement(f"python{project['requires-python']}").specifier
    assert str(pinned["pyspark"]) == str(pinned["pyspark-client"]) == f"=={arguments['PYSPARK_VERSION']}"
    celery = arguments["CELERY_PROVIDER_VERSION"]
    assert celery == importlib.metadata.version("apache-airflow-providers-celery")
    assert celery in pinned["apache-airflow-providers-celery"]
    assert f'"celery{pinned["celery"]}"' in (DOCKER / "Dockerfile").read_text(), "Celery, as pyproject.toml pins it"


def test_the_image_fetches_the_declared_jars_where_the_provider_looks_for_them() -> None:
    """jvm/pom.xml is the one list of the jars and their versions: a build stage fetches them with Maven, as
    scripts/setup.sh does, into share/spark-tables/jars of the image's virtual environment, where
    spark_tables.core.jvm_jars finds them; no version of theirs, and no Debian jar, is written in docker/."""
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "COPY jvm/pom.xml /jvm/pom.xml\n" in dockerfile
    assert "RUN mvn -B -q -f /jvm/pom.xml dependency:copy-dependencies -Djars.dir=/jars\n" in dockerfile
    folder = os.path.relpath(JARS_FOLDER, sys.prefix)
    assert f"COPY --from=jvm-jars --chown=airflow:0 /jars ${{VIRTUAL_ENV}}/{folder}\n" in dockerfile
    docker_files = [path.read_text() for path in DOCKER.iterdir() if path.is_file()]
    declared = [(artifact, version) for _, artifact, version, _ in _generator().declared_jars()]
    assert ("postgresql", "42.7.14") in declared
    for artifact, version in declared:
        assert not any(f"{artifact}-{version}" in text or f"{artifact}:{version}" in text for text in docker_files)
    assert not any("/usr/share/java" in text or "libpostgresql-jdbc-java" in text for text in docker_files)


def test_the_build_context_holds_what_the_dockerfile_copies() -> None:
    """.dockerignore lets in exactly what the Dockerfile copies from the repository (no .venv, no .airflow)."""
    copied = {
        source
        for line in re.findall(r"^COPY (?!--from)(.+)$", (DOCKER / "Dockerfile").read_text(), re.MULTILINE)
        for source in [word for word in line.split() if not word.startswith("--")][:-1]
    }
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert rules[0] == "*" and {rule[1:] for rule in rules if rule.startswith("!")} == copied
    assert all((ROOT / source).exists() for source in copied)


def test_the_dags_folder_is_written_once_and_any_folder_can_be_mounted(tmp_path: Path) -> None:
    """One mount of the DAGs folder for every Airflow service, ``DAGS_FOLDER`` in docker/.env choosing it."""
    text = (DOCKER / "compose.yaml").read_text()
    assert text.count("/opt/airflow/dags") == 1, "the DAGs folder's mount is written more than once"
    mine = tmp_path / "my_dags"
    airflow = _airflow(_config(DOCKER / "compose.yaml", DAGS_FOLDER=str(mine))["services"])
    assert airflow and all(_mounts(service).get("/opt/airflow/dags") == str(mine) for service in airflow.values())


def test_a_users_connections_come_from_the_env_file_docker_env_names(tmp_path: Path) -> None:
    own = tmp_path / "airflow.env"
    own.write_text(
        "AIRFLOW_CONN_CRM=postgres://etl:secret@crm-db:5432/crm\nAIRFLOW_CONN_SPARK_DEFAULT=spark://elsewhere:7077\n"
    )
    services = _config(DOCKER / "compose.yaml", AIRFLOW_ENV_FILE=str(own))["services"]
    for name, service in _airflow(services).items():
        assert service["environment"]["AIRFLOW_CONN_CRM"] == "postgres://etl:secret@crm-db:5432/crm", name
        assert service["environment"]["AIRFLOW_CONN_SPARK_DEFAULT"].startswith("spark://spark-master:7077"), name
    for name in _spark(services, "master.Master") | _spark(services, "worker.Worker"):
        assert "AIRFLOW_CONN_CRM" not in services[name].get("environment", {}), name
    default = _airflow(_config(DOCKER / "compose.yaml")["services"])  # airflow.env.example: nothing
    assert not any("AIRFLOW_CONN_CRM" in service["environment"] for service in default.values())


def test_the_s3_store_is_the_airflow_sides_and_the_servers_its_keys_in_no_command(
    services: dict[str, dict[str, Any]],
) -> None:
    """The aws connection of every Airflow service names the S3 store with docker/.env's keys, as the tests' name
    theirs; the store takes those keys from its environment, airflow-init makes its bucket once it is up."""
    store = services[urlsplit(S3).hostname]
    assert store["expose"] == [str(urlsplit(S3).port)] and "ports" not in store
    assert (store["environment"]["S3_ACCESS_KEY"], store["environment"]["S3_SECRET_KEY"]) == (
        REQUIRED["S3_ACCESS_KEY"],
        REQUIRED["S3_SECRET_KEY"],
    )
    assert REQUIRED["S3_SECRET_KEY"] not in _command(store) and f"-s3.port={urlsplit(S3).port}" in _command(store)
    expected = as_deployed.aws_connection(
        endpoint=S3, access_key=REQUIRED["S3_ACCESS_KEY"], secret_key=REQUIRED["S3_SECRET_KEY"]
    )
    for name, service in _airflow(services).items():
        assert json.loads(service["environment"]["AIRFLOW_CONN_AWS_DEFAULT"]) == json.loads(expected), name
    init = services["airflow-init"]
    assert init["depends_on"][urlsplit(S3).hostname]["condition"] == "service_healthy"
    assert 'create_bucket("spark-tables")' in _command(init)
