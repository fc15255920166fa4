"""PostgreSQL connection arguments: built as the postgres provider's ``PostgresHook`` builds them (a tripwire holds
``connect_args`` to the installed hook's ``get_conn``), every extra passed on, and no secret in a log or a URL."""

from __future__ import annotations

import logging
from typing import Any

import psycopg.connection
import pytest
from airflow.providers.common.compat.sdk import BaseHook
from airflow.providers.postgres.hooks.postgres import PostgresHook

from spark_tables.core.errors import SpecError
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.lookup.job import LookupJoinJob
from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.postgres import jdbc_properties, jdbc_url
from spark_tables.core.streaming.sinks import PostgresUpsertSink
from spark_tables.hooks.catalog import SparkTablesCatalogHook
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.hooks.postgres import CONNECT_TIMEOUT_SECONDS, PROVIDER_EXTRAS, PostgresSinkHook, connect_args

EXTRAS = {
    "sslmode": "verify-full",
    "sslrootcert": "/etc/ssl/certs/ca.pem",
    "sslcert": "/etc/ssl/certs/client.pem",
    "sslkey": "/etc/ssl/private/client.key",
    "sslcrl": "/etc/ssl/crl.pem",
    "options": "-c search_path=crm,public -c statement_timeout=5000",
    "application_name": "nightly",
    "keepalives": 1,
    "keepalives_idle": 30,
    "client_encoding": "UTF8",
    "cursor": "dictcursor",
    "sqlalchemy_query": {"a": "b"},
}
PASSWORD = "s3cret-pw-7f1"

pytestmark = pytest.mark.usefixtures("spark_tables_home")


def _hook_get_conn_args(monkeypatch: pytest.MonkeyPatch, conn_id: str) -> dict[str, Any]:
    """What the installed ``PostgresHook.get_conn`` hands psycopg for ``conn_id`` (no connection is opened)."""
    captured: dict[str, Any] = {}
    monkeypatch.setattr(psycopg.connection.Connection, "connect", classmethod(lambda cls, **kw: captured.update(kw)))
    monkeypatch.setattr("airflow.providers.postgres.hooks.postgres.register_default_adapters", lambda conn: None)
    PostgresHook(postgres_conn_id=conn_id).get_conn()
    return captured


@pytest.mark.parametrize("iam", [False, True], ids=["password", "iam-token"])
def test_the_arguments_are_the_hooks_own_less_its_cursor_and_this_providers_extras(
    set_connection: Any, monkeypatch: pytest.MonkeyPatch, iam: bool
) -> None:
    extra = {**EXTRAS, "jdbc-driver-jar": "/jars/pg.jar", **({"iam": True} if iam else {})}
    set_connection(
        "crm", conn_type="postgres", host="db", port=6432, schema="crm", login="u", password=PASSWORD, extra=extra
    )
    monkeypatch.setattr(PostgresHook, "get_iam_token", lambda self, conn: ("iam-user", "iam-token", 5433))

    hooks = _hook_get_conn_args(monkeypatch, "crm")
    ours = connect_args(BaseHook.get_connection("crm"), "lookup table customers")

    assert "row_factory" in hooks  # the hook's cursor extra, which jobs do not take (they read plain rows)
    expected = {name: value for name, value in hooks.items() if name != "row_factory" and name not in PROVIDER_EXTRAS}
    assert ours == expected
    assert ours["options"] == EXTRAS["options"] and ours["sslmode"] == "verify-full" and ours["keepalives_idle"] == 30
    assert "cursor" not in ours and "sqlalchemy_query" not in ours and "jdbc-driver-jar" not in ours
    assert (ours["user"], ours["password"], ours["port"]) == (
        ("iam-user", "iam-token", 5433) if iam else ("u", PASSWORD, 6432)
    )


def test_a_connection_without_port_or_password_gets_the_default_port_and_no_password(set_connection: Any) -> None:
    set_connection("crm", conn_type="postgres", host="db", schema="crm", login="u")

    assert connect_args(BaseHook.get_connection("crm"), "x") == {
        "host": "db",
        "port": 5432,
        "dbname": "crm",
        "user": "u",
    }


def test_an_extra_libpq_does_not_know_is_one_line_naming_it(set_connection: Any) -> None:
    set_connection("crm", conn_type="postgres", host="db", schema="crm", extra={"ssl_mode": "require"})

    with pytest.raises(SpecError) as error:
        LookupTableHook(LookupTable(name="customers", conn_id="crm", table="c", key=("id",))).source_table()
    assert str(error.value) == (
        "lookup table customers: connection 'crm' has an extra PostgreSQL does not take (invalid connection option "
        '"ssl_mode"): remove it, or name a libpq connection parameter (sslmode, sslrootcert, options, ...)'
    )


def test_a_job_s_connections_give_up_on_an_unreachable_host_in_seconds_unless_the_connection_says(
    set_connection: Any,
) -> None:
    """libpq's connect_timeout, pgjdbc's connectTimeout: without one, a host that never answers holds a lookup for
    the system's TCP timeouts (minutes), and again for each retry."""
    set_connection("crm", conn_type="postgres", host="db", schema="crm", login="u")
    set_connection("slow", conn_type="postgres", host="db", schema="crm", login="u", extra={"connect_timeout": 60})
    table = LookupTable(name="customers", conn_id="crm", table="customers", key=("id",))

    source = LookupTableHook(table).source_table()
    sinks = PostgresSinkHook().sink_connections([PostgresUpsertSink(name="s", conn_id="slow", table="t", key=("id",))])

    assert source.connection["connect_timeout"] == CONNECT_TIMEOUT_SECONDS == 10
    assert jdbc_properties(source.connection)["connectTimeout"] == "10"
    assert sinks["s"]["connect_timeout"] == 60, "the connection's own wins"


def test_lookup_tables_and_sinks_carry_every_extra_and_the_password_never_shows(
    set_connection: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    extra = {"sslmode": "require", "options": "-c search_path=crm", "sslpassword": "key-pass-9", "jdbc-driver-jar": "x"}
    set_connection(
        "crm", conn_type="postgres", host="db", port=6432, schema="crm", login="u", password=PASSWORD, extra=extra
    )
    table = LookupTable(name="customers", conn_id="crm", table="customers", key=("id",))
    sink = PostgresUpsertSink(name="counts", conn_id="crm", table="counts", key=("id",))

    source = LookupTableHook(table).source_table()
    sinks = PostgresSinkHook().sink_connections([sink])

    expected = {
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "host": "db",
        "port": 6432,
        "dbname": "crm",
        "user": "u",
        "password": PASSWORD,
        "sslmode": "require",
        "options": "-c search_path=crm",
        "sslpassword": "key-pass-9",
    }
    assert source.connection == expected and sinks == {"counts": expected}
    job = LookupJoinJob(
        probe="SELECT 1 AS id", lookup=LookupTableHook(table).spec(), on=("id",), metrics_uri="file:///metrics"
    )
    spec = JobSpec(job=job, result_uri="file:///r.json")
    assert spec.carries_credentials  # so it goes to the driver in a file, never on a command line
    for secret in (PASSWORD, "key-pass-9"):
        assert secret not in repr(source) and secret not in repr(job) and secret not in caplog.text


def test_a_spec_whose_only_secret_is_an_extras_key_password_still_travels_in_a_file() -> None:
    job = LookupJoinJob(
        probe="SELECT 1 AS id",
        lookup={
            "name": "customers",
            "source": {
                "kind": "postgres",
                "connection": {"host": "db", "dbname": "crm", "user": "u", "sslpassword": "key-pass-9"},
                "table": "customers",
                "key": ["id"],
            },
            "options": {},
            "snapshots": "file:///snapshots/customers",
        },
        on=("id",),
        metrics_uri="file:///metrics",
    )

    assert JobSpec(job=job, result_uri="file:///r.json").carries_credentials


def test_a_catalog_connections_extras_reach_the_schema_check_and_the_metastore_url_but_no_secret(
    set_connection: Any,
) -> None:
    set_connection(
        "spark_tables_default",
        conn_type="spark_tables",
        host="db",
        schema="hms",
        login="hive",
        password=PASSWORD,
        extra={"warehouse": "/wh", "sslmode": "require", "options": "-c search_path=hive", "sslpassword": "kp"},
    )

    catalog = SparkTablesCatalogHook().get_catalog()

    assert catalog.connect_args() == {
        "host": "db",
        "port": 5432,
        "dbname": "hms",
        "user": "hive",
        "password": PASSWORD,
        "sslmode": "require",
        "options": "-c search_path=hive",
        "sslpassword": "kp",
    }
    assert catalog.jdbc_url == "jdbc:postgresql://db:5432/hms?sslmode=require&options=-c%20search_path%3Dhive"
    assert not any(secret in str(catalog.spark_conf()) for secret in (PASSWORD, "kp"))
    assert PASSWORD not in repr(catalog) and "kp" not in repr(catalog)


def test_pgjdbc_gets_its_own_names_for_the_extras_it_knows_and_none_of_the_others() -> None:
    args = {
        "host": "db",
        "port": 6432,
        "dbname": "crm",
        "user": "u",
        "password": "p",
        "sslmode": "verify-ca",
        "sslrootcert": "/ca.pem",
        "options": "-c search_path=crm",
        "application_name": "nightly",
        "connect_timeout": 7,
        "keepalives": 0,
        "sslcrl": "/crl.pem",
        "keepalives_idle": 30,
        "client_encoding": "UTF8",
    }

    assert jdbc_url(args) == "jdbc:postgresql://db:6432/crm"
    assert jdbc_properties(args) == {
        "user": "u",
        "password": "p",
        "sslmode": "verify-ca",
        "sslrootcert": "/ca.pem",
        "options": "-c search_path=crm",
        "ApplicationName": "nightly",
        "connectTimeout": "7",
        "tcpKeepAlive": "false",
    }
