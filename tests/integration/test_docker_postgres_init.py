"""docker/postgres-init.sh, as the postgres image runs it when its volume is first made, on a real PostgreSQL (a
throwaway cluster): the metastore gets a role of its own with the password from the environment, and owns its
database; no password is on a command line."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess
from pathlib import Path

import psycopg

from tests.throwaway_postgres import throwaway_postgres

INIT = Path(__file__).resolve().parents[2] / "docker" / "postgres-init.sh"


def _scram_matches(stored: str, password: str) -> bool:
    """Whether PostgreSQL's SCRAM-SHA-256 verifier ``stored`` is that of ``password`` (RFC 5802's StoredKey)."""
    method, rest = stored.split("$", 1)
    iterations_salt, keys = rest.split("$")
    iterations, salt = iterations_salt.split(":")
    stored_key, _server_key = keys.split(":")
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return method == "SCRAM-SHA-256" and hashlib.sha256(client_key).digest() == base64.b64decode(stored_key)


def test_the_metastore_gets_a_role_of_its_own_with_the_environment_s_password() -> None:
    password = "metastore-" + os.urandom(8).hex()
    with throwaway_postgres() as port:
        env = {
            "PATH": os.environ["PATH"],
            "PGHOST": "127.0.0.1",
            "PGPORT": str(port),
            "POSTGRES_USER": "postgres",
            "POSTGRES_DB": "postgres",
            "METASTORE_PASSWORD": password,
        }
        done = subprocess.run(["bash", str(INIT)], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert password not in done.stdout + done.stderr

        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres") as conn:
            role = conn.execute(
                "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole, rolpassword FROM pg_authid "
                "WHERE rolname = 'metastore'"
            ).fetchone()
            owners = dict(
                conn.execute(
                    "SELECT datname, pg_get_userbyid(datdba) FROM pg_database WHERE datname IN ('metastore', 'demo')"
                ).fetchall()
            )

    assert role is not None
    can_login, superuser, create_db, create_role, verifier = role
    assert can_login and not (superuser or create_db or create_role)
    assert _scram_matches(verifier, password) and not _scram_matches(verifier, "airflow")
    assert owners == {"metastore": "metastore", "demo": "postgres"}
