from __future__ import annotations

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog, PostgresMetastore
from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER
from spark_tables.hooks.catalog import SparkTablesCatalogHook

pytestmark = pytest.mark.usefixtures("spark_tables_home")


def test_missing_default_connection_gives_the_embedded_catalog_under_the_configured_home(spark_tables_home):
    catalog = SparkTablesCatalogHook().get_catalog()

    assert catalog == EmbeddedCatalog(home=str(spark_tables_home))


def test_the_configured_home_is_read_on_each_call(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW__SPARK_TABLES__HOME", str(tmp_path / "other_home"))

    assert SparkTablesCatalogHook().get_catalog().home == str(tmp_path / "other_home")


def test_get_conn_returns_the_catalog(spark_tables_home):
    assert SparkTablesCatalogHook().get_conn() == EmbeddedCatalog(home=str(spark_tables_home))


def test_connection_without_host_gives_the_embedded_catalog_under_its_home_extra(set_connection, tmp_path):
    set_connection("spark_tables_default", conn_type="spark_tables", extra={"home": str(tmp_path / "catalog")})

    assert SparkTablesCatalogHook().get_catalog() == EmbeddedCatalog(home=str(tmp_path / "catalog"))


def test_connection_without_host_or_home_gives_the_embedded_catalog_under_the_configured_home(
    set_connection, spark_tables_home
):
    set_connection("lake", conn_type="spark_tables")

    assert SparkTablesCatalogHook(catalog_conn_id="lake").get_catalog() == EmbeddedCatalog(home=str(spark_tables_home))


def test_connection_with_host_gives_a_postgres_metastore(set_connection):
    set_connection(
        "spark_tables_default",
        conn_type="spark_tables",
        host="127.0.0.1",
        port=6543,
        schema="hms",
        login="hive",
        password="s3cret",
        extra={"warehouse": "/tmp/wh"},
    )

    catalog = SparkTablesCatalogHook().get_catalog()

    assert catalog == PostgresMetastore(
        host="127.0.0.1",
        port=6543,
        database="hms",
        user="hive",
        password="s3cret",
        warehouse="/tmp/wh",
        jdbc_driver_jar=POSTGRES_JDBC_DRIVER,
    )


def test_postgres_metastore_defaults_port_and_user(set_connection):
    set_connection("hms", conn_type="spark_tables", host="db", schema="hms", extra={"warehouse": "s3a://b/wh"})

    catalog = SparkTablesCatalogHook(catalog_conn_id="hms").get_catalog()

    assert (catalog.port, catalog.user, catalog.password) == (5432, "postgres", "")


def test_jdbc_driver_jar_comes_from_the_extra(set_connection):
    set_connection(
        "hms",
        conn_type="spark_tables",
        host="db",
        schema="hms",
        extra={"warehouse": "/wh", "jdbc-driver-jar": "/opt/jars/postgresql-42.jar"},
    )

    assert (
        SparkTablesCatalogHook(catalog_conn_id="hms").get_catalog().driver_class_path == "/opt/jars/postgresql-42.jar"
    )


def test_connection_with_host_but_no_warehouse_is_rejected(set_connection):
    set_connection("hms", conn_type="spark_tables", host="db", schema="hms")

    with pytest.raises(SpecError, match="warehouse"):
        SparkTablesCatalogHook(catalog_conn_id="hms").get_catalog()


def test_connection_with_host_but_no_database_is_rejected(set_connection):
    set_connection("hms", conn_type="spark_tables", host="db", extra={"warehouse": "/wh"})

    with pytest.raises(SpecError, match="schema"):
        SparkTablesCatalogHook(catalog_conn_id="hms").get_catalog()


def test_missing_non_default_connection_is_rejected_by_name():
    with pytest.raises(SpecError, match="catalog connection 'no_such_catalog' does not exist") as caught:
        SparkTablesCatalogHook(catalog_conn_id="no_such_catalog").get_catalog()

    assert "\n" not in str(caught.value)
