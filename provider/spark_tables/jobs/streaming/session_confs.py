"""The Spark settings a streaming job's queries run with: the state store, no-data micro-batches, the watermark
policy, and how many partitions each stateful operator's state has."""

from __future__ import annotations

from pyspark.sql import SparkSession

from spark_tables.jobs.session_facts import default_parallelism

#: What the session of a query running these operators needs.
SESSION_CONFS = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    # Spark's stream-stream join (``spark_join``): both sides' time columns read the same clock, so the later of
    # their watermarks is the time every input has reached; the earlier (Spark's default) would keep an idle
    # side's partners in state until that side has data again.
    "spark.sql.streaming.multipleWatermarkPolicy": "max",
}
#: The confs of a query whose every stateful operator is Spark's own: no-data micro-batches, in which the watermark
#: moves on without new rows, Spark's joins drop what expired and a left join sends its left rows that expired
#: unmatched. A query with a node on transform-with-state (every aggregation, so every buffered sink's query) runs
#: without them (``SESSION_CONFS``): it would never end available-now.
NO_DATA_BATCHES = {"spark.sql.streaming.noDataMicroBatches.enabled": "true"}


#: Spark's setting of how many partitions a shuffle, and so a stateful operator's state, has.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def state_partitions(spark: SparkSession, configured: int | None) -> int:
    """How many partitions each stateful operator's state has: Flink's ``table.exec.resource.default-parallelism``
    when the job sets it (``configured``), else the application's default parallelism (its cores), not Spark's 200
    shuffle partitions, each of which would cost every micro-batch a state store and a Python worker. Spark keeps
    the number in the checkpoint: it is chosen at a job's first execution."""
    return configured or default_parallelism(spark)
