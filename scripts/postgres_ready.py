"""PostgreSQL for the README's two commands (scripts/services.sh's ``postgres_ready`` runs this in the venv):

    python scripts/postgres_ready.py [--manage] CHOOSER HOST PORT USER DATABASE...

makes sure that USER logs in at HOST:PORT and that every DATABASE exists (creating the missing ones). The password,
where the caller has one, comes in ``PGPASSWORD``; otherwise libpq finds it in its password file (``PGPASSFILE``, or
``~/.pgpass``), as every client the scripts start does: psycopg, Airflow's PostgreSQL hook and PostgreSQL's JDBC
driver all read that file.

With ``--manage`` (as root, with Debian's PostgreSQL installed, HOST on loopback) it also makes the server: a
cluster of Debian's on PORT (created if there is none, ``pg_createcluster``), started if it is down, and, where the
login is refused for want of a password, USER's login: a random password set over the cluster's Unix socket as the
``postgres`` system user (on psql's standard input, never a command line) and written to libpq's password file
(mode 600), only when USER has no password yet, so that a password someone set is never replaced.

Exits 0 when all is there; otherwise prints one line saying what is missing and what to do, and exits 2 when USER
cannot log in at all, 1 when it logs in but a database could not be created. CHOOSER names the setting that points
the caller at another server.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

LOOPBACK = ("127.0.0.1", "localhost")
START_SECONDS = 60


class Problem(Exception):
    """One line for the caller's error message; ``status`` the exit status."""

    def __init__(self, line: str, status: int = 2) -> None:
        super().__init__(line)
        self.status = status


@dataclass(frozen=True)
class Cluster:
    """A PostgreSQL cluster of Debian's postgresql-common (``pg_lsclusters``)."""

    version: str
    name: str
    running: bool
    log: str

    def __str__(self) -> str:
        return f"{self.version} {self.name}"


def main(argv: list[str]) -> int:
    manage = argv[:1] == ["--manage"]
    args = argv[1:] if manage else argv
    if len(args) < 4:
        raise SystemExit(__doc__)
    chooser, host, port, user, *databases = args
    try:
        try:
            conn = login(host, port, user)
        except psycopg.OperationalError as err:
            if not manage:
                raise Problem(not_logged_in(host, port, user, err, chooser, could_manage=True)) from None
            conn = make_server(host, port, user, chooser)
        create_databases(conn, databases)
    except Problem as problem:
        print(problem)
        return problem.status
    return 0


def login(host: str, port: str, user: str, dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(host=host, port=port, user=user, dbname=dbname, autocommit=True, connect_timeout=5)


def not_logged_in(
    host: str, port: str, user: str, err: psycopg.Error, chooser: str, *, could_manage: bool = False
) -> str:
    """What to do when ``user`` cannot log in; ``could_manage``: a local server the caller, as root, would set up."""
    reason = " ".join(str(err).splitlines()[0].split())  # the first line has the cause
    line = f"PostgreSQL does not let user {user} log in at {host}:{port} ({reason})"
    if host in LOOPBACK and could_manage:
        return (
            f"{line}: run scripts/test.sh or scripts/demo.sh as root once (they install, start and set up a local "
            f"PostgreSQL), or set {chooser} to a server that lets that user in"
        )
    return f"{line}: start it there (or let that user in), or set {chooser} to a server that does"


def make_server(host: str, port: str, user: str, chooser: str) -> psycopg.Connection:
    """A cluster on ``port`` started, and ``user``'s login set up where it lacks a password; ``user``'s connection."""
    if host not in LOOPBACK or os.geteuid() != 0:
        raise Problem(f"cannot set up PostgreSQL at {host}:{port}: only a local one, as root; set {chooser}")
    cluster = cluster_on(port) or create_cluster(port)
    if not cluster.running:
        start(cluster, host, port)
    try:
        return login(host, port, user)
    except psycopg.OperationalError as err:
        if not wants_password(err):
            raise Problem(not_logged_in(host, port, user, err, chooser)) from None
    set_up_login(host, port, user)
    try:
        return login(host, port, user)
    except psycopg.OperationalError as err:
        raise Problem(not_logged_in(host, port, user, err, chooser)) from None


def clusters() -> list[dict]:
    listed = subprocess.run(["pg_lsclusters", "--json"], capture_output=True, text=True, check=True)
    return json.loads(listed.stdout or "[]")


def cluster_on(port: str) -> Cluster | None:
    for found in clusters():
        if str(found["port"]) == port:
            return Cluster(str(found["version"]), found["cluster"], bool(found["running"]), found["logfile"])
    return None


def create_cluster(port: str) -> Cluster:
    """A new cluster of the newest installed version on ``port``, named ``main`` unless that name is taken
    (``spark_tables_<port>`` then)."""
    versions = sorted((path.parent.parent.name for path in Path("/usr/lib/postgresql").glob("*/bin/postgres")), key=int)
    if not versions:
        raise Problem("PostgreSQL's server is not installed: run 'apt-get install postgresql' as root")
    version = versions[-1]
    taken = {found["cluster"] for found in clusters() if str(found["version"]) == version}
    name = "main" if "main" not in taken else f"spark_tables_{port}"
    print(f"creating a PostgreSQL cluster (pg_createcluster {version} {name} --port {port}) ...", file=sys.stderr)
    made = subprocess.run(
        ["pg_createcluster", version, name, "--port", port], capture_output=True, text=True, check=False
    )
    if made.returncode != 0:
        raise Problem(f"pg_createcluster {version} {name} failed: {' '.join(made.stderr.split())}")
    cluster = cluster_on(port)
    if cluster is None:
        raise Problem(f"pg_createcluster {version} {name} made no cluster on port {port}")
    return cluster


def start(cluster: Cluster, host: str, port: str) -> None:
    print(f"starting PostgreSQL (pg_ctlcluster {cluster} start) ...", file=sys.stderr)
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", cluster.version, cluster.name, "start"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if subprocess.run(["pg_isready", "-q", "-h", host, "-p", port], check=False).returncode == 0:
            return
        time.sleep(0.5)
    raise Problem(
        f"PostgreSQL {cluster} did not start within {START_SECONDS} s (log: {cluster.log}): "
        f"run 'pg_ctlcluster {cluster} start' as root and read what it says"
    )


def wants_password(err: psycopg.Error) -> bool:
    """Whether the server refused the login for a missing or wrong password (not, say, pg_hba.conf's refusal)."""
    text = str(err)
    return "no password supplied" in text or "password authentication failed" in text


def set_up_login(host: str, port: str, user: str) -> None:
    """A random password for ``user`` (made a login role if it is none), kept in libpq's password file, set only if
    the role has none: a password someone set is theirs, and its users would lose their way in."""
    has_password = _psql(port, "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = :'role'", user)
    passfile = password_file()
    if has_password == "t":
        raise Problem(
            f"PostgreSQL's user {user} at {host}:{port} has a password the scripts do not know: add the line "
            f"'{host}:{port}:*:{user}:<its password>' to {passfile} (libpq's password file), or set PGPASSWORD"
        )
    password = secrets.token_urlsafe(24)  # letters, digits, - and _: nothing to escape in SQL or the file
    statement = "ALTER ROLE :\"role\" LOGIN PASSWORD '{password}'"
    if has_password == "":
        statement = "CREATE ROLE :\"role\" LOGIN CREATEDB PASSWORD '{password}'"
    print(f"setting up PostgreSQL's login for {user}: a password, kept in {passfile} ...", file=sys.stderr)
    remember(passfile, f"{host}:{port}:*:{user}:", password)
    _psql(port, statement.format(password=password), user)


def password_file() -> Path:
    """libpq's password file, where pgjdbc looks too: ``PGPASSFILE``, or ``~/.pgpass``."""
    return Path(os.environ.get("PGPASSFILE") or Path.home() / ".pgpass")


def remember(passfile: Path, key: str, password: str) -> None:
    """``key + password`` as the first line of ``passfile`` (the first matching line wins), without an older line
    of that key; written whole, readable by its owner alone (libpq ignores a file others may read)."""
    kept = passfile.read_text().splitlines() if passfile.exists() else []
    lines = [key + password, *(line for line in kept if not line.startswith(key))]
    written = passfile.with_name(passfile.name + ".new")
    written.unlink(missing_ok=True)
    with os.fdopen(os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write("\n".join(lines) + "\n")
    written.replace(passfile)


def _psql(port: str, statement: str, role: str) -> str:
    """``statement`` run by psql as the ``postgres`` system user over the cluster's Unix socket (peer login), with
    ``:'role'`` and ``:"role"`` quoting ``role``; its one value, or "" for no row. The statement goes on standard
    input: a password in it is on no command line."""
    ran = subprocess.run(
        [
            "runuser",
            "-u",
            "postgres",
            "--",
            "psql",
            "-X",
            "-q",
            "-A",
            "-t",
            "-p",
            port,
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            f"role={role}",
        ],
        input=statement + ";\n",
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )
    if ran.returncode != 0:
        raise Problem(f"setting up PostgreSQL's login for {role} failed: {' '.join(ran.stderr.split())}")
    return ran.stdout.strip()


def create_databases(conn: psycopg.Connection, databases: list[str]) -> None:
    """Each of ``databases`` that does not exist, created; ``conn`` closed after."""
    with conn:
        for name in databases:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                continue
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            except psycopg.Error as err:
                raise Problem(
                    f"creating the PostgreSQL database {name} failed: {' '.join(str(err).split())}", 1
                ) from None
            print(f"created the PostgreSQL database {name}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
