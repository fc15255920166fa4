"""No password of any connection is ever on the command line of a process the provider starts (issue 12, item 5).

One ``airflow dags test`` of a lookup join on a PostgreSQL metastore: the catalog, lookup and Spark connections all
carry distinctive random passwords. While it runs, a watcher thread reads the command line of every process on the
machine every few milliseconds and records any that holds one of them.

The PostgreSQL behind it is a throwaway cluster of this module's (``tests/throwaway_postgres.py``) that trusts every
local client, so it would never ask for the passwords: each database connection goes through a ``PasswordGate``
instead, which asks the client for its password (cleartext, over loopback), admits the
right one only and relays the connection to the real server. So the job succeeding shows the passwords reached every
client that needed them (the task's psycopg, SchemaTool, the driver's Hive client and JDBC reader, the executors'
psycopg), and the gate says which process each login came from.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
import pytest

from spark_tables.core.catalog_config import PostgresMetastore
from tests.integration.conftest import SCENARIOS, Deployment, _base_env, _migrated
from tests.throwaway_postgres import throwaway_postgres

pytestmark = pytest.mark.integration

DAG_ID = "guarded_connections"
#: This test's own database (metastore schema and lookup table): other tests' databases are left alone.
DATABASE = "spark_tables_guarded_test" + (
    f"_{os.environ['PYTEST_XDIST_WORKER']}" if "PYTEST_XDIST_WORKER" in os.environ else ""
)
METASTORE_PASSWORD = f"metastore-pw-{secrets.token_hex(12)}"
LOOKUP_PASSWORD = f"lookup-pw-{secrets.token_hex(12)}"
SPARK_PASSWORD = f"spark-pw-{secrets.token_hex(12)}"
#: The throwaway cluster's user, on loopback.
HOST, USER = "127.0.0.1", "postgres"
PASSWORDS = (METASTORE_PASSWORD, LOOKUP_PASSWORD, SPARK_PASSWORD)

#: What a process is, by its command line: the ones the provider starts, and the task running them.
PROCESS_KINDS = (
    ("SparkSubmit JVM", re.compile(r"java\b.*org\.apache\.spark\.deploy\.SparkSubmit")),
    ("SchemaTool JVM", re.compile(r"java\b.*org\.datanucleus\.store\.schema\.SchemaTool")),
    ("python driver (entry.py)", re.compile(r"python\S*\s+\S*spark_tables/jobs/entry\.py\b")),
    ("pyspark worker", re.compile(r"pyspark[./](daemon|worker)")),
    ("spark-submit script", re.compile(r"\bspark-submit\b")),
    ("airflow dags test", re.compile(r"\bairflow\s+dags\s+test\b")),
)


def kind_of(command: str) -> str:
    return next((kind for kind, pattern in PROCESS_KINDS if pattern.search(command)), "other")


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:  # gone meanwhile
        return ""


@dataclass
class CommandLineWatcher:
    """Reads every process's command line every ``interval`` seconds until stopped."""

    secrets: tuple[str, ...]
    interval: float = 0.005
    sweeps: int = 0
    longest_gap: float = 0.0
    #: Every (pid, command line) seen, and the sweeps each kind of process was seen in.
    seen: dict[tuple[int, str], str] = field(default_factory=dict)
    sightings: Counter = field(default_factory=Counter)
    pid_sightings: Counter = field(default_factory=Counter)
    #: Each command line that held a secret, the secret masked, with the sweeps that saw it.
    leaks: Counter = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)

    def _sweep(self) -> None:
        kinds = set()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            command = _cmdline(pid)
            if not command:
                continue
            held = [secret for secret in self.secrets if secret in command]
            if held:
                masked = command
                for secret in held:
                    masked = masked.replace(secret, "<PASSWORD>")
                self.leaks[f"pid {pid}: {masked}"] += 1
            if (int(pid), command) not in self.seen:
                self.seen[(int(pid), command)] = kind_of(command)
            kinds.add(self.seen[(int(pid), command)])
            self.pid_sightings[int(pid)] += 1
        self.sightings.update(kinds)
        self.sweeps += 1

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            self._sweep()
            now = time.monotonic()
            self.longest_gap, last = max(self.longest_gap, now - last), now
            time.sleep(self.interval)

    @contextlib.contextmanager
    def watching(self) -> Iterator[CommandLineWatcher]:
        thread = threading.Thread(target=self._run, name="cmdline-watcher", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def pids_of(self, kind: str) -> set[int]:
        return {pid for (pid, _), seen_kind in self.seen.items() if seen_kind == kind}


# PostgreSQL's wire protocol, as much as a password gate needs (https://www.postgresql.org/docs/current/protocol.html).
SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client closed the connection")
        data += chunk
    return data


def _recv_untyped(sock: socket.socket) -> bytes:
    """A message without a type byte (startup, SSL request, cancel request): length then body; returned whole."""
    head = _recv_exactly(sock, 4)
    return head + _recv_exactly(sock, struct.unpack("!I", head)[0] - 4)


def _socket_owner(local_port: int, remote_port: int) -> tuple[int, str]:
    """The process holding the loopback TCP socket from ``local_port`` to ``remote_port``: its pid and command line."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as handle:
            for line in list(handle)[1:]:
                parts = line.split()
                if int(parts[1].rsplit(":", 1)[1], 16) == local_port and int(parts[2].rsplit(":", 1)[1], 16) == (
                    remote_port
                ):
                    inode = parts[9]
    if inode is None:
        return 0, ""
    target = f"socket:[{inode}]"
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return int(pid), _cmdline(pid)
    return 0, ""


@dataclass(frozen=True)
class Login:
    user: str
    database: str
    admitted: bool
    client: str  # the kind of process that logged in
    pid: int


class PasswordGate:
    """A PostgreSQL front on an ephemeral port that asks each client for ``password`` (cleartext), admits only that
    one, and relays the admitted connection to the real server on ``upstream_port``."""

    def __init__(self, password: str, upstream_port: int) -> None:
        self.password = password
        self.upstream = (HOST, upstream_port)
        self.logins: list[Login] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        threading.Thread(target=self._accept, name=f"password-gate-{self.port}", daemon=True).start()

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with contextlib.ExitStack() as closing:
            closing.callback(client.close)
            try:
                startup = _recv_untyped(client)
                while struct.unpack("!I", startup[4:8])[0] in (SSL_REQUEST, GSSENC_REQUEST):
                    client.sendall(b"N")  # no encryption: go on in the clear
                    startup = _recv_untyped(client)
                if struct.unpack("!I", startup[4:8])[0] == CANCEL_REQUEST:
                    with socket.create_connection(self.upstream) as upstream:
                        upstream.sendall(startup)
                    return
                words = startup[8:].split(b"\0")
                params = dict(zip(words[0::2], words[1::2], strict=False))
                user, database = params.get(b"user", b"").decode(), params.get(b"database", b"").decode()
                pid, command = _socket_owner(client.getpeername()[1], self.port)
                client.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
                kind, length = struct.unpack("!cI", _recv_exactly(client, 5))
                answer = _recv_exactly(client, length - 4).rstrip(b"\0").decode(errors="replace")
                admitted = kind == b"p" and answer == self.password
                self.logins.append(Login(user, database, admitted, kind_of(command), pid))
                if not admitted:
                    fields = (
                        b"SFATAL\0VFATAL\0C28P01\0" + f'Mpassword authentication failed for user "{user}"\0'.encode()
                    )
                    client.sendall(b"E" + struct.pack("!I", len(fields) + 5) + fields + b"\0")
                    return
                upstream = closing.enter_context(socket.create_connection(self.upstream))
                upstream.sendall(startup)  # the real server trusts it and answers AuthenticationOk, then relays on
            except (OSError, ConnectionError, struct.error):
                return
            relay = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            relay.start()
            _pipe(client, upstream)
            relay.join()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


@pytest.fixture(scope="module")
def upstream_port() -> Iterator[int]:
    """The real server behind the gates: a throwaway cluster that trusts every local client."""
    with throwaway_postgres() as port:
        yield port


@pytest.fixture(scope="module")
def secrets_database(upstream_port: int) -> str:
    """This test's database: an empty public schema (so the run creates the metastore schema) and a lookup table."""
    with psycopg.connect(host=HOST, port=upstream_port, user=USER, dbname="postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
    with psycopg.connect(host=HOST, port=upstream_port, user=USER, dbname=DATABASE, autocommit=True) as conn:
        for statement in (
            "DROP SCHEMA IF EXISTS public CASCADE",
            "CREATE SCHEMA public",
            "DROP SCHEMA IF EXISTS guarded_demo CASCADE",
            "CREATE SCHEMA guarded_demo",
            "CREATE TABLE guarded_demo.customers (customer_id integer PRIMARY KEY, name text NOT NULL)",
            "INSERT INTO guarded_demo.customers SELECT i, 'customer ' || i FROM generate_series(1, 30) i",
        ):
            conn.execute(statement)
    return DATABASE


@pytest.fixture(scope="module")
def gates(upstream_port: int) -> Iterator[dict[str, PasswordGate]]:
    opened = {
        "metastore": PasswordGate(METASTORE_PASSWORD, upstream_port),
        "lookup": PasswordGate(LOOKUP_PASSWORD, upstream_port),
    }
    yield opened
    for gate in opened.values():
        gate.close()


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory, secrets_database: str, gates: dict[str, PasswordGate]
) -> Deployment:
    """An Airflow whose catalog, lookup and Spark connections all carry passwords; its databases behind the gates."""
    home = tmp_path_factory.mktemp("airflow-guarded")
    (home / "spark-events").mkdir()
    catalog = PostgresMetastore(
        host="127.0.0.1",
        port=gates["metastore"].port,
        user=USER,
        password=METASTORE_PASSWORD,
        database=secrets_database,
        warehouse=str(home / "warehouse"),
    )
    env = _base_env(home)
    env.update(
        AIRFLOW__CORE__DAGS_FOLDER=str(SCENARIOS),
        AIRFLOW_CONN_SPARK_TABLES_DEFAULT=json.dumps(
            {
                "conn_type": "spark_tables",
                "host": catalog.host,
                "port": catalog.port,
                "schema": catalog.database,
                "login": catalog.user,
                "password": METASTORE_PASSWORD,
                "extra": {"warehouse": catalog.warehouse},
            }
        ),
        AIRFLOW_CONN_SPARK_TABLES_GUARDED_LOOKUP=json.dumps(
            {
                "conn_type": "postgres",
                "host": "127.0.0.1",
                "port": gates["lookup"].port,
                "schema": secrets_database,
                "login": USER,
                "password": LOOKUP_PASSWORD,
            }
        ),
        # The Spark connection's password is unused by spark-submit: it must not turn up anywhere either.
        AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": "local[2]", "password": SPARK_PASSWORD}),
    )
    _migrated(home, env)
    return Deployment(home=home, catalog=catalog, env=env)


def _event_log(deployment: Deployment) -> tuple[str, list[dict]]:
    [log_file] = [path for path in (deployment.home / "spark-events").iterdir() if path.is_file()]
    text = log_file.read_text()
    return text, [json.loads(line) for line in text.splitlines() if line.strip()]


def test_no_password_of_any_connection_is_on_a_command_line(
    guarded: Deployment, gates: dict[str, PasswordGate], upstream_port: int
) -> None:
    watcher = CommandLineWatcher(secrets=PASSWORDS)
    started = time.monotonic()
    with watcher.watching():
        done = guarded.airflow("dags", "test", DAG_ID)
    seconds = time.monotonic() - started
    output = done.stdout + done.stderr
    for password in PASSWORDS:
        output = output.replace(password, "<PASSWORD>")
    assert done.returncode == 0, output[-6000:]
    metastore_clients = Counter(login.client for login in gates["metastore"].logins)
    lookup_clients = Counter(login.client for login in gates["lookup"].logins)
    # This run's processes among every process on the machine: those that logged in through its gates, and the
    # driver reading its spec from this Airflow's exchange.
    ours = {
        kind: {login.pid for gate in gates.values() for login in gate.logins if login.client == kind}
        for kind in ("SparkSubmit JVM", "SchemaTool JVM", "pyspark worker")
    }
    ours["python driver (entry.py)"] = {
        pid
        for (pid, command), kind in watcher.seen.items()
        if kind == "python driver (entry.py)" and f"@file://{guarded.home}/" in command
    }
    print(  # the evidence: pytest -s shows it
        f"\n{seconds:.1f} s, {watcher.sweeps} sweeps of every command line, longest gap "
        f"{watcher.longest_gap * 1000:.0f} ms; sweeps that saw each of this run's processes: "
        f"{ {kind: [watcher.pid_sightings[pid] for pid in sorted(pids)] for kind, pids in ours.items()} }; "
        f"logins to the metastore {dict(metastore_clients)}, to the lookup database {dict(lookup_clients)}"
    )

    assert not watcher.leaks, "a password was on a command line:\n" + "\n".join(
        f"{line} (in {count} sweeps)" for line, count in watcher.leaks.items()
    )
    # Not vacuous: the watcher saw this run's processes while they ran, many times over.
    # (a gap under 5 s: shorter than any process of the run lives, and long enough for a starved thread on 2 busy
    # cores; each process's own sightings, below, are the evidence)
    assert watcher.sweeps > 100 and watcher.longest_gap < 5.0
    for kind, pids in ours.items():
        assert pids, f"no {kind} of this run was found"
        assert all(watcher.pid_sightings[pid] >= 3 for pid in pids), f"the watcher hardly saw the {kind} {pids}"
    driver_jvm_commands = [command for (pid, command) in watcher.seen if pid in ours["SparkSubmit JVM"]]
    assert any(f"--name {DAG_ID}.enrich" in command for command in driver_jvm_commands), driver_jvm_commands
    assert "<PASSWORD>" not in output, "the task log showed a password"

    # Each password reached every client that logs in with it, and no client tried without it.
    assert all(login.admitted for gate in gates.values() for login in gate.logins), [
        login for gate in gates.values() for login in gate.logins if not login.admitted
    ]
    assert metastore_clients["SchemaTool JVM"] and metastore_clients["airflow dags test"]  # creates, checks the schema
    assert metastore_clients["SparkSubmit JVM"], "the driver's Hive client never logged in to the metastore"
    assert lookup_clients["SparkSubmit JVM"], "the driver's JDBC reader never logged in to the lookup database"
    assert lookup_clients["pyspark worker"], "no executor worker logged in to the lookup database"

    # The job did what it was for: its table is in the metastore the gate guards.
    assert guarded.xcom(DAG_ID, "enrich")["rows"] == 200
    with psycopg.connect(host=HOST, port=upstream_port, user=USER, dbname=guarded.catalog.database) as conn:
        tables = {row[0] for row in conn.execute('SELECT "TBL_NAME" FROM "TBLS"')}
    assert "guarded_orders_enriched" in tables

    # Spark shows the password setting the driver got from the spec, its value redacted; nothing shows a password.
    text, events = _event_log(guarded)
    assert not any(password in text for password in PASSWORDS), "Spark's event log (and UI) showed a password"
    [environment] = [event for event in events if event["Event"] == "SparkListenerEnvironmentUpdate"]
    spark_properties = dict(environment["Spark Properties"])
    hadoop_properties = dict(environment["Hadoop Properties"])
    assert spark_properties["spark.hadoop.javax.jdo.option.ConnectionPassword"] == "*********(redacted)"
    assert hadoop_properties["javax.jdo.option.ConnectionPassword"] == "*********(redacted)"
    java_command = dict(environment["System Properties"])["sun.java.command"]
    # The driver JVM's whole command line, not redacted now that it names no password setting (Spark redacts a
    # value that matches spark.redaction.regex too: so no name in this test's DAG, paths or tables says "secret").
    assert "org.apache.spark.deploy.SparkSubmit" in java_command, java_command
    assert "ConnectionURL=jdbc:postgresql" in java_command, java_command
    assert "ConnectionPassword" not in java_command
