from __future__ import annotations

import os

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog, PostgresMetastore
from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import POSTGRES_JDBC_DRIVER


def _metastore(**overrides) -> PostgresMetastore:
    fields = {"host": "db.example", "database": "hms", "warehouse": "s3a://bucket/warehouse"}
    fields.update(overrides)
    return PostgresMetastore(**fields)


class TestEmbeddedCatalog:
    def test_spark_conf_selects_the_hive_catalog(self, tmp_path):
        conf = EmbeddedCatalog(home=str(tmp_path)).spark_conf()

        assert conf["spark.sql.catalogImplementation"] == "hive"

    def test_warehouse_is_an_absolute_file_uri_under_home(self, tmp_path):
        conf = EmbeddedCatalog(home=str(tmp_path)).spark_conf()

        assert conf["spark.sql.warehouse.dir"] == f"file:{tmp_path}/warehouse"

    def test_warehouse_uri_escapes_spaces(self, tmp_path):
        home = tmp_path / "my home"

        conf = EmbeddedCatalog(home=str(home)).spark_conf()

        assert conf["spark.sql.warehouse.dir"] == f"file:{tmp_path}/my%20home/warehouse"

    def test_derby_database_is_created_under_home(self, tmp_path):
        conf = EmbeddedCatalog(home=str(tmp_path)).spark_conf()

        assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == (
            f"jdbc:derby:;databaseName={tmp_path}/metastore_db;create=true"
        )

    def test_derby_log_goes_under_home(self, tmp_path):
        conf = EmbeddedCatalog(home=str(tmp_path)).spark_conf()

        assert conf["spark.driver.extraJavaOptions"] == f"-Dderby.stream.error.file={tmp_path}/derby.log"

    def test_relative_home_is_made_absolute(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)

        catalog = EmbeddedCatalog(home="relative/home")

        assert catalog.home == os.path.join(str(tmp_path), "relative", "home")
        assert catalog.lock_path == os.path.join(str(tmp_path), "relative", "home", "metastore.lock")

    @pytest.mark.parametrize("home", ["", "file:///data/spark_tables", "s3://bucket/home", "hdfs://nn/home"])
    def test_home_that_is_not_a_local_path_is_rejected(self, home):
        with pytest.raises(SpecError, match="must be a local folder path"):
            EmbeddedCatalog(home=home)

    def test_admits_one_application_at_a_time(self, tmp_path):
        assert EmbeddedCatalog(home=str(tmp_path)).exclusive is True

    def test_has_no_secret(self, tmp_path):
        assert EmbeddedCatalog(home=str(tmp_path)).secret_conf() == {}


class TestPostgresMetastore:
    def test_spark_conf_points_the_hive_client_at_postgres(self):
        conf = _metastore(port=6543, user="hive", password="s3cret").spark_conf()

        assert conf["spark.sql.catalogImplementation"] == "hive"
        assert conf["spark.hadoop.javax.jdo.option.ConnectionURL"] == "jdbc:postgresql://db.example:6543/hms"
        assert conf["spark.hadoop.javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
        assert conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] == "hive"
        secret = _metastore(port=6543, user="hive", password="s3cret").secret_conf()
        assert secret == {"spark.hadoop.javax.jdo.option.ConnectionPassword": "s3cret"}

    def test_the_password_is_in_the_secret_conf_only(self):
        metastore = _metastore(password="s3cret")

        assert "spark.hadoop.javax.jdo.option.ConnectionPassword" not in metastore.spark_conf()
        assert "s3cret" not in repr(metastore.spark_conf())
        assert "s3cret" not in repr(metastore), "a log line or error message showing the catalog must not show it"
        assert metastore.metastore_properties()["javax.jdo.option.ConnectionPassword"] == "s3cret"  # for SchemaTool

    def test_without_a_password_there_is_no_secret_and_the_empty_password_is_passed_as_before(self):
        metastore = _metastore()

        assert metastore.secret_conf() == {}
        assert metastore.spark_conf()["spark.hadoop.javax.jdo.option.ConnectionPassword"] == ""

    def test_spark_conf_turns_schema_verification_and_auto_creation_off(self):
        conf = _metastore().spark_conf()

        assert conf["spark.hadoop.hive.metastore.schema.verification"] == "false"
        assert conf["spark.hadoop.datanucleus.schema.autoCreateAll"] == "false"

    @pytest.mark.parametrize("password", ["", "s3cret"])
    def test_every_metastore_property_is_passed_to_spark_as_hadoop_conf(self, password):
        metastore = _metastore(password=password)
        conf = {**metastore.spark_conf(), **metastore.secret_conf()}

        for key, value in metastore.metastore_properties().items():
            assert conf[f"spark.hadoop.{key}"] == value

    def test_warehouse_uri_is_kept_as_given(self):
        assert _metastore(warehouse="s3a://bucket/wh").spark_conf()["spark.sql.warehouse.dir"] == "s3a://bucket/wh"

    def test_warehouse_path_becomes_a_file_uri(self):
        assert _metastore(warehouse="/shared/wh").spark_conf()["spark.sql.warehouse.dir"] == "file:/shared/wh"

    def test_defaults(self):
        metastore = _metastore()

        assert (metastore.port, metastore.user, metastore.password) == (5432, "postgres", "")
        assert metastore.driver_class_path == POSTGRES_JDBC_DRIVER
        assert metastore.exclusive is False

    @pytest.mark.parametrize("missing", ["host", "database"])
    def test_missing_host_or_database_is_rejected(self, missing):
        with pytest.raises(SpecError, match="needs a host and a schema"):
            _metastore(**{missing: ""})

    def test_missing_warehouse_is_rejected(self):
        with pytest.raises(SpecError, match="extra 'warehouse'"):
            _metastore(warehouse="")
