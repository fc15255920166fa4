"""Cached tables kept in a Spark Connect server's memory (FLIP-36's session cluster): a global temporary view,
cached with ``CACHE TABLE``, which the server's later sessions read without touching files until the run releases
it or the server's application ends.

The cached relation keeps the partitions of the plan that computed it: an aggregate's 200 shuffle partitions would
make every read of even a small table schedule 200 tasks, so the result is coalesced to the application's default
parallelism before it is cached.
"""

from __future__ import annotations

import contextlib
import re

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.cache.descriptor import CacheDescriptor
from spark_tables.core.cache.layout import memory_location, memory_parts
from spark_tables.jobs.session_facts import application_id, default_parallelism

#: The size and rows Spark's plan statistics give a cached relation once it is materialized:
#: ``Statistics(sizeInBytes=4.0 MiB, rowCount=5.00E+4)``.
_STATISTICS = re.compile(
    r"Statistics\(sizeInBytes=(?P<size>[0-9.]+)\s*(?P<unit>[KMGTPE]i)?B(?:, rowCount=(?P<rows>[0-9.E+-]+))?"
)
_UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}


def keep_in_memory(spark: SparkSession, frame: DataFrame, view: str) -> tuple[str, int, int]:
    """Cache ``frame`` as the global temporary view ``view``: its location (the application and the qualified
    view), rows and bytes. If caching fails or is interrupted, the view is dropped: nothing is left half-made."""
    qualified = f"{global_temp_database(spark)}.{view}"
    frame.coalesce(default_parallelism(spark)).createGlobalTempView(view)
    try:
        spark.sql(f"CACHE TABLE {qualified}")  # eager: the relation is materialized, its statistics exact
        rows, size = cached_statistics(spark, qualified)
        if rows is None:
            rows = spark.table(qualified).count()
    except BaseException:
        with contextlib.suppress(Exception):
            release(spark, qualified)
        raise
    return memory_location(application_id(spark), qualified), rows, size


def memory_problem(spark: SparkSession, descriptor: CacheDescriptor) -> str | None:
    """Why a copy kept in memory cannot be read in this session, in one line; None if it is there."""
    held_by, qualified = memory_parts(descriptor.location)
    running = application_id(spark)
    if running != held_by:
        return f"the server's application {held_by} that held it has ended ({running} runs now)"
    try:
        cached = spark.catalog.isCached(qualified)
    except AnalysisException:
        return f"its view {qualified} is gone from the server"
    return None if cached else f"its view {qualified} is no longer cached on the server"


def release(spark: SparkSession, qualified: str) -> None:
    """Uncache a copy kept in memory and drop its view; nothing if either is gone already."""
    spark.sql(f"UNCACHE TABLE IF EXISTS {qualified}")
    spark.catalog.dropGlobalTempView(qualified.rsplit(".", 1)[1])


def cached_statistics(spark: SparkSession, qualified: str) -> tuple[int | None, int]:
    """The rows and bytes of a materialized cached relation (storage memory, or the executors' disks if it spilled),
    as Spark's plan statistics give them, bytes rounded to three digits: no Spark job to count them."""
    [[plan]] = spark.sql(f"EXPLAIN COST SELECT * FROM {qualified}").collect()
    return plan_statistics(plan)


def plan_statistics(plan: str) -> tuple[int | None, int]:
    """The first ``rowCount`` (None if it gives none) and ``sizeInBytes`` (0 if none) of a plan's statistics
    (``EXPLAIN COST``)."""
    found = _STATISTICS.search(plan)
    if found is None:
        return None, 0
    rows = round(float(found.group("rows"))) if found.group("rows") else None
    return rows, round(float(found.group("size")) * _UNITS[found.group("unit")])


def global_temp_database(spark: SparkSession) -> str:
    """The database of global temporary views (``spark.sql.globalTempDatabase``, set when the application starts)."""
    return spark.conf.get("spark.sql.globalTempDatabase", "global_temp") or "global_temp"
