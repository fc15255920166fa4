"""A real Apache Kafka broker on loopback for the tests and the demo, from the server jars scripts/setup.sh fetches
(jvm/kafka-broker/pom.xml): one process in KRaft mode (broker and controller), on two free ports, its data under a
folder of its own. No Docker here.

    python scripts/kafka_broker.py start HOME JARS   # prints the broker's bootstrap address, host:port
    python scripts/kafka_broker.py stop HOME         # stops it and removes HOME

``start`` returns once the broker serves (its log says it started), or fails in one line with the log's tail.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from loopback_servers import free_port, stop_server

#: How long a start may take: about 6-11 s on this project's 2-core machine.
START_SECONDS = 90
#: The line the broker logs once it serves its listeners.
STARTED = "Kafka Server started"
#: The broker's JVM: small, and C1 only (it serves tests for minutes, as QUICK_JIT of tests/conftest.py says).
JAVA_OPTIONS = ["-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]

LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
"""


def _cluster_id() -> str:
    """A KRaft cluster id (a UUID in URL-safe base64), never starting with '-', which the storage tool would read as
    an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home and os.path.exists(os.path.join(home, "bin", "java")) else "java"


def server_properties(home: Path, port: int, controller_port: int) -> str:
    """One node that is broker and controller, with single-replica internal topics (one broker)."""
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={home / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "",
        ]
    )


def bootstrap_address(home: Path) -> str:
    """The address clients bootstrap from: the advertised listener of ``home``'s server.properties (the first
    loopback port there is the controller's)."""
    for line in (home / "server.properties").read_text().splitlines():
        if line.startswith("advertised.listeners="):
            return line.split("//", 1)[1]
    raise SystemExit(f"error: {home / 'server.properties'} names no advertised listener")


def start(home: Path, jars: Path) -> str:
    if not any(jars.glob("kafka_2.13*.jar")):
        raise SystemExit(f"error: no Kafka broker jars in {jars}: run scripts/setup.sh, which fetches them")
    if (home / "broker.pid").exists():
        raise SystemExit(f"error: a broker of {home} is running (or was not stopped): run 'stop {home}' first")
    home.mkdir(parents=True, exist_ok=True)
    port, controller_port = free_port(), free_port()
    config = home / "server.properties"
    config.write_text(server_properties(home, port, controller_port))
    log = home / "broker.log"
    (home / "log4j2.properties").write_text(LOG4J.format(log=log))
    java = [
        _java(),
        *JAVA_OPTIONS,
        f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}",
        "-cp",
        str(jars / "*"),
    ]
    formatted = subprocess.run(
        [*java, "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    if formatted.returncode != 0:
        raise SystemExit(
            "error: formatting the broker's storage failed: " + (formatted.stderr or formatted.stdout)[-2000:]
        )
    with open(home / "broker.out", "wb") as out:
        broker = subprocess.Popen(
            [*java, "kafka.Kafka", str(config)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    (home / "broker.pid").write_text(str(broker.pid))
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if broker.poll() is not None:
            break
        if log.exists() and STARTED in log.read_text(errors="replace"):
            return bootstrap_address(home)
        time.sleep(0.2)  # the broker says nothing but in its log
    tail = (home / "broker.out").read_text(errors="replace")[-1500:] + (
        log.read_text(errors="replace")[-1500:] if log.exists() else ""
    )
    stop(home)
    raise SystemExit(f"error: the Kafka broker did not start within {START_SECONDS} s; its log ends:\n{tail}")


def stop(home: Path) -> None:
    stop_server(home, "broker.pid")


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "start":
        print(start(Path(argv[1]).absolute(), Path(argv[2])))
    elif len(argv) == 2 and argv[0] == "stop":
        stop(Path(argv[1]).absolute())
    else:
        raise SystemExit("usage: kafka_broker.py start HOME JARS | stop HOME")


if __name__ == "__main__":
    main(sys.argv[1:])
