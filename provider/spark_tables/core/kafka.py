"""A Kafka connection as Spark's Kafka connector takes it.

The Airflow connection is the Kafka provider's (type ``kafka``): its extra is librdkafka's configuration, as
``KafkaBaseHook`` hands confluent-kafka (``{"bootstrap.servers": "host:9092", "security.protocol": "SASL_SSL",
...}``). Spark's connector takes the Java client's settings, prefixed ``kafka.``. Most names are the same in both
clients; SASL's user and password become the Java client's JAAS line, a CA given inline (``ssl.ca.pem``) or as a
file (``ssl.ca.location``, read on the Airflow side) a PEM trust store. The consumer-group settings of a connection
shared with Airflow's own consumers are left out (Spark's connector keeps its offsets in the checkpoint and names
its own groups). Any other name is refused in one line: a misspelt setting would otherwise be ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from spark_tables.core.errors import SpecError

#: Kafka's own rule for topic names.
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: librdkafka's settings the Java client takes by the same name, with the same meaning.
SAME_NAMES = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "security.protocol",
        "request.timeout.ms",
        "retry.backoff.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "metadata.max.age.ms",
        "socket.connection.setup.timeout.ms",
        "connections.max.idle.ms",
        "client.dns.lookup",
        "acks",
        "compression.type",
        "linger.ms",
        "enable.idempotence",
        "sasl.kerberos.service.name",
    }
)
#: Settings of Airflow's own consumers (the Kafka provider's sensors and operators) that Spark's connector manages
#: itself: left out.
CONSUMER_GROUP_NAMES = frozenset(
    {"group.id", "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms", "session.timeout.ms"}
)
#: The JAAS login module of each SASL mechanism whose user and password the connection may hold.
LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
#: The settings that make a CA certificate, SASL's user and password, into the Java client's.
TRANSLATED = frozenset(
    {
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.pem",
        "ssl.ca.location",
        "ssl.endpoint.identification.algorithm",
    }
)


def checked_topic(topic: object, where: str) -> str:
    """``topic`` if Kafka takes it as a topic name, else one line naming ``where`` it is declared."""
    if not isinstance(topic, str) or not TOPIC_NAME.fullmatch(topic):
        raise SpecError(f"{where}: topic {topic!r} is not a Kafka topic name (letters, digits, . _ -)")
    return topic


def _jaas_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def spark_options(
    config: Mapping[str, Any], conn_id: str, read_file: Callable[[str], str] | None = None
) -> dict[str, str]:
    """Spark's Kafka connector options (``kafka.*``) for the librdkafka ``config`` of connection ``conn_id``;
    ``read_file`` reads ``ssl.ca.location``'s PEM file (the Airflow side's, so that no path need exist where Spark
    runs). ``SpecError`` in one line for a setting that has no counterpart or is missing."""
    where = f"kafka connection {conn_id!r}"
    settings = {str(name): value for name, value in config.items()}
    if not str(settings.get("bootstrap.servers", "")).strip():
        raise SpecError(f"{where}: its extra has no bootstrap.servers: set it to the brokers' host:port list")
    for name in sorted(settings):
        if name not in SAME_NAMES and name not in CONSUMER_GROUP_NAMES and name not in TRANSLATED:
            raise SpecError(
                f"{where}: setting {name!r} has no counterpart in Spark's Kafka connector: remove it from the "
                f"connection's extra (taken: {', '.join(sorted(SAME_NAMES | TRANSLATED))})"
            )
    options = {f"kafka.{name}": str(value) for name, value in settings.items() if name in SAME_NAMES}
    if "kafka.security.protocol" in options:
        options["kafka.security.protocol"] = options["kafka.security.protocol"].upper()
    mechanism = str(settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "").upper()
    username, password = settings.get("sasl.username"), settings.get("sasl.password")
    if mechanism:
        options["kafka.sasl.mechanism"] = mechanism
    if username is not None or password is not None:
        module = LOGIN_MODULES.get(mechanism or "PLAIN")
        if module is None:
            raise SpecError(
                f"{where}: sasl.username and sasl.password serve SASL {' or '.join(LOGIN_MODULES)}, not "
                f"{mechanism}: set sasl.mechanism to one of them"
            )
        if username is None or password is None:
            raise SpecError(f"{where}: give both sasl.username and sasl.password, or neither")
        options.setdefault("kafka.sasl.mechanism", "PLAIN")
        options["kafka.sasl.jaas.config"] = (
            f"{module} required username={_jaas_quoted(str(username))} password={_jaas_quoted(str(password))};"
        )
    pem = settings.get("ssl.ca.pem")
    if pem is None and settings.get("ssl.ca.location") is not None:
        if read_file is None:
            raise SpecError(f"{where}: ssl.ca.location is read on the Airflow side, which was not asked to")
        try:
            pem = read_file(str(settings["ssl.ca.location"]))
        except OSError as err:
            raise SpecError(f"{where}: ssl.ca.location cannot be read ({err.strerror}): name a PEM file") from None
    if pem is not None:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.certificates"] = str(pem)
    if "ssl.endpoint.identification.algorithm" in settings:
        algorithm = str(settings["ssl.endpoint.identification.algorithm"]).lower()
        options["kafka.ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" else algorithm
    return options


def describe(options: Mapping[str, str]) -> str:
    """The brokers and security of ``options`` (``spark_options``'), for EXPLAIN and the task log: no secret."""
    protocol = options.get("kafka.security.protocol", "PLAINTEXT")
    mechanism = options.get("kafka.sasl.mechanism")
    return f"{options['kafka.bootstrap.servers']} ({protocol}{', SASL ' + mechanism if mechanism else ''})"
