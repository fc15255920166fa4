"""A throwaway PostgreSQL on loopback: its own cluster (initdb) on a free port, trusting its clients, started once for
the tests that use it and removed after them (a few seconds). For a test whose server must behave as the tests' own
does not: one that takes TLS connections only (with a self-signed certificate), or one that asks no password of a
client that a password gate in front of it has already asked."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(path.split("/")[4]))
    if not found:
        raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql: apt-get install postgresql")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def throwaway_postgres(*, tls_only: bool = False) -> Iterator[int]:
    """Start the cluster in a temporary folder (user ``postgres``, trust authentication; with ``tls_only`` over TLS
    only, a connection without it rejected); yields its port, and stops and removes it after."""
    bin_dir, port = _binaries(), _free_port()
    # In /tmp, not $TMPDIR: PostgreSQL refuses a socket path over 107 bytes, and the postgres user must reach it.
    root = Path(tempfile.mkdtemp(prefix="spark-tables-postgres-", dir="/tmp"))
    data = root / "data"
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: the cluster belongs to the postgres user
        shutil.chown(root, "postgres", "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]

    def run(*command: str) -> None:
        subprocess.run([*as_postgres, *command], check=True, capture_output=True, text=True, cwd=root)

    run(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "--no-sync")
    with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write(f"port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{root}'\nfsync = off\n")
    (data / "pg_hba.conf").write_text("local all all trust\nhost all all 127.0.0.1/32 trust\n")
    if tls_only:
        _tls_only(data, run)
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-w", "start")
    try:
        yield port
    finally:
        run(str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def _tls_only(data: Path, run: Callable[..., None]) -> None:
    """A self-signed certificate for 127.0.0.1, and connections without TLS rejected."""
    run(
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout", str(data / "server.key"), "-out", str(data / "server.crt"),
    )  # fmt: skip
    (data / "server.key").chmod(0o600)
    with open(data / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n")
    (data / "pg_hba.conf").write_text(
        "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n"
    )
