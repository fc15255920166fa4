"""What a job asks of its Spark session, asked the same way of a driver's own session (spark-submit) and of a Spark
Connect client's (session mode), which has no SparkContext."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


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
    is the default parallelism.
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.sql.leafNodeDefaultParallelism", None)
    if configured:
        return int(configured)
    # Selected first: Spark refuses a non-deterministic expression inside an aggregate.
    highest = spark.range(1 << 16).select(F.spark_partition_id().alias("p")).agg(F.max("p")).first()[0]
    return int(highest) + 1
