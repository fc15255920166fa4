"""What a job asks of its Spark session, asked the same way of a driver's own session (spark-submit) and of a Spark
Connect client's (session mode), which has no SparkContext."""

from __future__ import annotations

import re

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

#: A range's partitions in its physical plan.
_RANGE_SPLITS = re.compile(r"Range \(0, \d+, step=1, splits=(\d+)\)")


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client's session (its class is pyspark's Connect one)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def application_id(spark: SparkSession) -> str:
    """The Spark application the session runs in: the driver's own, or the Connect server's."""
    return spark.conf.get("spark.app.id")


def default_parallelism(spark: SparkSession) -> int:
    """The application's default parallelism (its cores, on local and standalone masters).

    A Connect client cannot ask the SparkContext, so it asks a range of rows how many partitions it gets: Spark
    splits a range without a partition count into ``spark.sql.leafNodeDefaultParallelism`` partitions, whose default
    is the default parallelism. The range's physical plan says it without a Spark job (``splits_in_plan``); where
    it does not, a job counts them.
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.sql.leafNodeDefaultParallelism", None)
    if configured:
        return int(configured)
    planned = splits_in_plan(spark)
    if planned is not None:
        return planned
    # Selected first: Spark refuses a non-deterministic expression inside an aggregate.
    highest = spark.range(1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]
    return int(highest) + 1


def splits_in_plan(spark: SparkSession) -> int | None:
    """The partitions of a range without a partition count, as its physical plan names them (``Range (0, 65536,
    step=1, splits=2)``): the one reading of Spark's plan text here, checked against a server by a test
    (``tests/integration/test_session_mode.py``); None if the plan no longer says it so."""
    [[plan]] = spark.sql(f"EXPLAIN SELECT * FROM range({1 << 16})").collect()
    found = _RANGE_SPLITS.search(plan)
    return int(found.group(1)) if found else None
