"""Table formats a catalog loads: Delta Lake when its connection says so, its jars those jvm/pom.xml declares, and
bad settings refused in one line before anything runs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog, PostgresMetastore
from spark_tables.core.errors import SpecError
from spark_tables.core.jvm_jars import declared_jar
from spark_tables.core.table_format.delta import DELTA
from spark_tables.core.table_format.format import TableFormat
from spark_tables.core.table_format.formats import formats_conf, table_formats
from spark_tables.hooks.catalog import SparkTablesCatalogHook

POM = Path(__file__).resolve().parents[2] / "jvm" / "pom.xml"


def _declared() -> dict[str, str]:
    """jvm/pom.xml's dependencies: artifact -> group:artifact:version."""
    maven = "{http://maven.apache.org/POM/4.0.0}"
    root = ET.parse(POM).getroot()
    return {
        dependency.findtext(f"{maven}artifactId", ""): ":".join(
            dependency.findtext(f"{maven}{part}", "") for part in ("groupId", "artifactId", "version")
        )
        for dependency in root.iter(f"{maven}dependency")
    }


def test_delta_s_jars_and_coordinates_are_those_jvm_pom_declares():
    declared = _declared()
    artifacts = [coordinate.split(":")[1] for coordinate in DELTA.coordinates]

    assert [declared[artifact] for artifact in artifacts] == list(DELTA.coordinates)
    assert DELTA.jars == tuple(declared_jar(artifact) for artifact in artifacts)


def test_a_catalog_loads_delta_when_told_and_nothing_otherwise(tmp_path):
    loaded = EmbeddedCatalog(home=str(tmp_path), table_formats=("delta",)).spark_conf()
    plain = EmbeddedCatalog(home=str(tmp_path)).spark_conf()

    assert loaded["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert loaded["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert {key: value for key, value in loaded.items() if key not in plain} == formats_conf((DELTA,))
    metastore = PostgresMetastore(host="db", database="hms", warehouse="/wh", table_formats=("delta",))
    assert metastore.jars == DELTA.jars and formats_conf((DELTA,)).items() <= metastore.spark_conf().items()
    assert PostgresMetastore(host="db", database="hms", warehouse="/wh").jars == ()


def test_an_unknown_table_format_fails_in_one_line_naming_the_setting_and_the_known_ones(tmp_path):
    with pytest.raises(SpecError) as raised:
        EmbeddedCatalog(home=str(tmp_path), table_formats=("iceberg",))

    assert str(raised.value) == (
        "the catalog connection's extra 'table-formats': unknown table format 'iceberg': use delta, or none ([])"
    )


def _no_version(location: str, list_names: object, read_text: object) -> None:
    return None


def test_a_missing_jar_fails_in_one_line_naming_its_coordinates_and_what_to_do(tmp_path):
    fetched = tmp_path / "present.jar"
    fetched.write_bytes(b"")
    coordinates = ("org.example:lake:1", "org.example:log:1")
    lake = TableFormat("lake", (str(fetched), "/no/lake.jar"), coordinates, "E", "C", read_version=_no_version)

    with pytest.raises(SpecError) as raised:
        lake.check_jars("the catalog connection's extra 'table-formats'")

    assert str(raised.value) == (
        "table format lake: jar /no/lake.jar not found: fetch the jars jvm/pom.xml declares (scripts/setup.sh does; "
        "docs/configuration.md#jvm-jars), give Spark org.example:lake:1,org.example:log:1 another way, or leave lake "
        "out of the catalog connection's extra 'table-formats'"
    )


def test_two_formats_that_each_need_the_session_catalog_cannot_share_a_session():
    other = TableFormat("other", (), (), "org.example.Extensions", "org.example.Catalog", read_version=_no_version)

    with pytest.raises(SpecError, match=r"^table formats delta, other each need their own session catalog"):
        formats_conf((DELTA, other))
    assert formats_conf(()) == {}
    assert table_formats((), "setting") == ()


@pytest.mark.parametrize("host", ["", "db"])
def test_the_catalog_connection_s_extra_sets_its_table_formats(set_connection, tmp_path, host):
    extra = {"warehouse": "/wh", "home": str(tmp_path), "table-formats": ["delta"]}
    set_connection("cat", conn_type="spark_tables", host=host, schema="hms", extra=extra)
    set_connection("default_formats", conn_type="spark_tables", host=host, schema="hms", extra={"warehouse": "/wh"})

    assert SparkTablesCatalogHook(catalog_conn_id="cat").get_catalog().table_formats == ("delta",)
    assert SparkTablesCatalogHook(catalog_conn_id="default_formats").get_catalog().table_formats == ()


def test_table_formats_given_as_a_string_fail_in_one_line(set_connection):
    set_connection("cat", conn_type="spark_tables", extra={"table-formats": "delta"})

    with pytest.raises(SpecError, match=r"^catalog connection 'cat': extra 'table-formats' must be a list of format"):
        SparkTablesCatalogHook(catalog_conn_id="cat").get_catalog()


@pytest.mark.parametrize("host", ["", "db"])
def test_the_catalog_connection_s_default_format_is_the_sessions_default(set_connection, tmp_path, host):
    extra = {"warehouse": "/wh", "home": str(tmp_path), "table-formats": ["delta"], "default-format": "Delta"}
    set_connection("lake", conn_type="spark_tables", host=host, schema="hms", extra=extra)
    set_connection("files", conn_type="spark_tables", host=host, schema="hms", extra={"warehouse": "/wh"})

    lake = SparkTablesCatalogHook(catalog_conn_id="lake").get_catalog()
    files = SparkTablesCatalogHook(catalog_conn_id="files").get_catalog()

    assert lake.default_format == "delta" and lake.spark_conf()["spark.sql.sources.default"] == "delta"
    assert files.default_format is None and "spark.sql.sources.default" not in files.spark_conf()


def test_a_file_format_may_be_the_default_without_loading_anything(tmp_path):
    catalog = EmbeddedCatalog(home=str(tmp_path), default_format="orc")

    assert catalog.spark_conf()["spark.sql.sources.default"] == "orc" and catalog.jars == ()


@pytest.mark.parametrize(
    ("default_format", "message"),
    [
        (
            "delta",
            "the catalog connection's extra 'default-format': delta is not loaded by the catalog: add it to "
            "'table-formats' too",
        ),
        (
            "iceberg",
            "the catalog connection's extra 'default-format': unknown format 'iceberg': use one of parquet, "
            "orc, json, csv, avro, text",
        ),
    ],
)
def test_a_default_format_the_catalog_does_not_make_tables_in_fails_in_one_line(tmp_path, default_format, message):
    with pytest.raises(SpecError) as raised:
        PostgresMetastore(host="db", database="hms", warehouse="/wh", default_format=default_format)

    assert str(raised.value) == message


def test_a_default_format_that_is_not_a_name_fails_in_one_line(set_connection):
    set_connection("cat", conn_type="spark_tables", extra={"default-format": ["delta"]})

    with pytest.raises(SpecError, match=r"^catalog connection 'cat': extra 'default-format' must be a format's name"):
        SparkTablesCatalogHook(catalog_conn_id="cat").get_catalog()
