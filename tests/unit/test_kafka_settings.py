"""A Kafka provider connection's librdkafka settings as Spark's Kafka connector takes them (``core.kafka``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import holds_secret
from spark_tables.core.kafka import describe, spark_options

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_a_plain_connection_names_its_brokers_and_leaves_its_consumer_group_out() -> None:
    options = spark_options(
        {"bootstrap.servers": "b1:9092,b2:9092", "group.id": "airflow", "auto.offset.reset": "earliest"}, "k"
    )
    assert options == {"kafka.bootstrap.servers": "b1:9092,b2:9092"}
    assert describe(options) == "b1:9092,b2:9092 (PLAINTEXT)"


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [
        ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
        ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ],
)
def test_sasl_user_and_password_become_the_java_clients_jaas_line(mechanism: str, module: str) -> None:
    options = spark_options(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": mechanism,
            "sasl.username": "etl",
            "sasl.password": 'p"w\\d',
        },
        "k",
    )
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == mechanism
    assert options["kafka.sasl.jaas.config"] == f'{module} required username="etl" password="p\\"w\\\\d";'
    assert holds_secret(options), "the job spec knows it holds a secret: never on a command line"
    assert "p" + '"w' not in describe(options) and describe(options) == f"b:9093 (SASL_SSL, SASL {mechanism})"


def test_a_ca_inline_or_in_a_file_read_on_the_airflow_side_is_a_pem_trust_store() -> None:
    inline = spark_options({"bootstrap.servers": "b:9093", "ssl.ca.pem": PEM}, "k")
    from_file = spark_options(
        {"bootstrap.servers": "b:9093", "ssl.ca.location": "/etc/kafka/ca.pem"},
        "k",
        read_file={"/etc/kafka/ca.pem": PEM}.__getitem__,
    )
    expected = {
        "kafka.bootstrap.servers": "b:9093",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": PEM,
    }
    assert inline == from_file == expected
    off = spark_options({"bootstrap.servers": "b", "ssl.endpoint.identification.algorithm": "none"}, "k")
    assert off["kafka.ssl.endpoint.identification.algorithm"] == ""


def _missing(path: str) -> str:
    raise FileNotFoundError(2, "No such file or directory", path)


@pytest.mark.parametrize(
    ("config", "read_file", "error"),
    [
        ({"group.id": "g"}, None, "kafka connection 'k': its extra has no bootstrap.servers: set it"),
        (
            {"bootstrap.servers": "b", "fetch.wait.max.ms": "5"},
            None,
            "kafka connection 'k': setting 'fetch.wait.max.ms' has no counterpart in Spark's Kafka connector",
        ),
        (
            {"bootstrap.servers": "b", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"},
            None,
            "kafka connection 'k': sasl.username and sasl.password serve SASL PLAIN or SCRAM-SHA-256 or SCRAM-SHA-512",
        ),
        (
            {"bootstrap.servers": "b", "sasl.username": "u"},
            None,
            "kafka connection 'k': give both sasl.username and sasl.password, or neither",
        ),
        (
            {"bootstrap.servers": "b", "ssl.ca.location": "/nowhere/ca.pem"},
            _missing,
            "kafka connection 'k': ssl.ca.location cannot be read (No such file or directory): name a PEM file",
        ),
    ],
)
def test_a_setting_without_counterpart_or_missing_is_one_line(
    config: dict[str, str], read_file: Callable[[str], str] | None, error: str
) -> None:
    with pytest.raises(SpecError) as raised:
        spark_options(config, "k", read_file=read_file)
    assert str(raised.value).startswith(error) and "\n" not in str(raised.value)
