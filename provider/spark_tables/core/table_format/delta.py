"""Delta Lake for Spark 4.2: the jars ``jvm/pom.xml`` declares, its SQL extensions and its session catalog, which
makes and loads Delta tables in the Hive metastore and hands every other table to Spark's own."""

from __future__ import annotations

from spark_tables.core.jvm_jars import declared_jar
from spark_tables.core.table_format import delta_log
from spark_tables.core.table_format.format import TableFormat

DELTA = TableFormat(
    name="delta",
    jars=(declared_jar("delta-spark_4.2_2.13"), declared_jar("delta-storage")),
    coordinates=("io.delta:delta-spark_4.2_2.13:4.4.0", "io.delta:delta-storage:4.4.0"),
    extensions="io.delta.sql.DeltaSparkSessionExtension",
    session_catalog="org.apache.spark.sql.delta.catalog.DeltaCatalog",
    read_version=delta_log.read_version,
)
