"""Cached tables kept in the application's memory (session mode's storage): a cached global temporary view, read by
later sessions of the same application and given up when that application has ended. Run on the tests' classic
session: global temporary views and ``CACHE TABLE`` are the same there as on a Spark Connect server."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spark_tables.core.cache.descriptor import CacheDescriptor, descriptor_of_copy
from spark_tables.core.cache.layout import memory_location, memory_parts
from spark_tables.core.cache.table import MEMORY
from spark_tables.core.job_spec import CacheUse
from spark_tables.jobs.cache import memory
from spark_tables.jobs.cache.views import prepare_cached_views
from spark_tables.jobs.cancellation import Cancellation
from tests.spark.test_cached_views import B_NEVER_COMPUTED, OWNER, B, view_rows

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def no_view_left(spark: SparkSession) -> Iterator[None]:
    """The session is shared: the views and cached relations these tests make must not outlive them."""
    yield
    spark.catalog.dropTempView("b")
    for table in spark.catalog.listTables("global_temp"):
        if table.name.startswith("spark_tables_") and table.isTemporary:
            memory.release(spark, f"global_temp.{table.name}")


def prepare(spark: SparkSession, use: CacheUse) -> dict[str, Any]:
    reports: dict[str, dict[str, Any]] = {}
    prepare_cached_views(spark, (use,), Cancellation(), reports)
    return reports[use.table.name]


def in_memory(view: str, *registered: CacheDescriptor, table: Any = B) -> CacheUse:
    return CacheUse(table, registered=registered, location=view, storage=MEMORY)


def kept(report: dict[str, Any]) -> CacheDescriptor:
    descriptor = descriptor_of_copy(B.name, B.fingerprint, report, OWNER, "2026-11-27T10:00:00+00:00", "spark_conn")
    assert descriptor is not None
    return descriptor


@pytest.fixture
def first(spark: SparkSession) -> tuple[CacheDescriptor, list[tuple]]:
    """A copy of b kept in memory by a miss, and b's rows."""
    return kept(prepare(spark, in_memory("spark_tables_b_first"))), view_rows(spark)


def test_a_miss_caches_the_table_in_the_applications_memory_with_few_partitions(spark):
    report = prepare(spark, in_memory("spark_tables_b_1"))

    descriptor = kept(report)
    assert report["status"] == "miss" and report["damaged"] == []
    assert descriptor.location == memory_location(spark.sparkContext.applicationId, "global_temp.spark_tables_b_1")
    assert (descriptor.in_memory, descriptor.server, descriptor.partitions) == (True, "spark_conn", ())
    assert descriptor.rows == 50 and descriptor.bytes == report["bytes_written"] > 0
    assert spark.catalog.isCached("global_temp.spark_tables_b_1")
    cached = spark.table("global_temp.spark_tables_b_1")
    assert cached.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism, "not the shuffle's 200"
    assert view_rows(spark) == sorted(tuple(r) for r in spark.sql(B.query).collect())


def test_a_hit_reads_the_cached_view_and_never_computes_the_definition(spark, first):
    descriptor, rows = first

    report = prepare(spark, in_memory("spark_tables_b_2", descriptor, table=B_NEVER_COMPUTED))

    assert report["status"] == "hit" and report["location"] == descriptor.location
    assert report["read_from"] == "memory"
    assert "written" not in report and report["bytes_written"] == 0
    assert view_rows(spark) == rows
    assert [t.name for t in spark.catalog.listTables("global_temp") if t.name == "spark_tables_b_2"] == []


def test_a_copy_of_an_application_that_has_ended_falls_back_and_is_reported_unusable(spark, first):
    descriptor, rows = first
    lost = dataclasses.replace(descriptor, location=memory_location("app-20261127000000-0000", "global_temp.x"))

    report = prepare(spark, in_memory("spark_tables_b_3", lost))

    assert report["status"] == "fallback"
    [damaged] = report["damaged"]
    assert damaged["location"] == lost.location
    assert damaged["problem"] == (
        f"the server's application app-20261127000000-0000 that held it has ended "
        f"({spark.sparkContext.applicationId} runs now)"
    )
    assert kept(report).location.endswith("global_temp.spark_tables_b_3") and view_rows(spark) == rows


def test_a_copy_no_longer_cached_falls_back(spark, first):
    descriptor, rows = first
    spark.sql(f"UNCACHE TABLE {memory_parts(descriptor.location)[1]}")

    report = prepare(spark, in_memory("spark_tables_b_4", descriptor))

    assert report["status"] == "fallback"
    assert (
        report["damaged"][0]["problem"] == "its view global_temp.spark_tables_b_first is no longer cached on the server"
    )
    assert view_rows(spark) == rows


def test_a_copy_whose_view_was_dropped_falls_back(spark, first):
    descriptor, _ = first
    memory.release(spark, memory_parts(descriptor.location)[1])

    report = prepare(spark, in_memory("spark_tables_b_5", descriptor))

    assert report["damaged"][0]["problem"] == "its view global_temp.spark_tables_b_first is gone from the server"


def test_a_table_that_fails_while_it_is_cached_leaves_no_view_behind(spark):
    failing = dataclasses.replace(B, query="SELECT IF(id < 5, id, raise_error('row ' || id)) AS k FROM range(10)")

    with pytest.raises(Exception, match=r"row \d"):
        prepare(spark, in_memory("spark_tables_b_6", table=failing))

    assert "spark_tables_b_6" not in {t.name for t in spark.catalog.listTables("global_temp")}


def test_releasing_a_copy_twice_releases_it_once(spark, first):
    descriptor, _ = first
    view = memory_parts(descriptor.location)[1]

    memory.release(spark, view)
    memory.release(spark, view)

    assert "spark_tables_b_first" not in {t.name for t in spark.catalog.listTables("global_temp")}


@pytest.mark.parametrize(
    ("statistics", "rows", "size"),
    [
        ("sizeInBytes=4.0 MiB, rowCount=5.00E+4", 50000, 4 << 20),
        ("sizeInBytes=1600.0 B, rowCount=100", 100, 1600),
        ("sizeInBytes=512.0 B", None, 512),
        ("sizeInBytes=1.5 KiB", None, 1536),
    ],
)
def test_the_rows_and_bytes_of_a_cached_relation_are_read_from_its_plan_statistics(statistics, rows, size):
    plan = f"== Optimized Logical Plan ==\nInMemoryRelation [k#0L], StorageLevel(...), Statistics({statistics})\n"
    assert memory.plan_statistics(plan) == (rows, size)
