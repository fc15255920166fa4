"""A sink's query with its output buffered: the buffer in front of the sink, the flush requests, the counts.

The sink's query reads the buffer's frame instead of the plan's; ``sink_queries`` decides when to request a flush
(idle input, end of input). Counts come from each batch's observed metrics (Spark's ``observe``, in the query's
progress): the rows emitted, and for each cause the batches that flushed on it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_tables.core.streaming.flush import STATE_STORE, FlushOptions
from spark_tables.core.streaming.sinks import KeyedSink
from spark_tables.jobs.streaming.buffer import CAUSES, FLUSH_CAUSE, buffered
from spark_tables.jobs.streaming.clock import Clock
from spark_tables.jobs.streaming.flush_requests import flush_requests, prepare_requests, request_flush
from spark_tables.jobs.streaming.progress import input_rows, observed_metrics

#: The name of the buffer's observed metrics in a query's progress.
METRICS = "spark_tables_buffer"


class OutputBuffer:
    """The buffer of one sink's query, its flush requests in ``<checkpoint>-flush-requests``."""

    #: A flush request is a row the query's next micro-batch reads.
    requests_need_a_batch = True

    def __init__(
        self,
        spark: SparkSession,
        frame: DataFrame,
        sink: KeyedSink,
        options: FlushOptions,
        clock: Clock,
        checkpoint: str,
    ) -> None:
        self.spark = spark
        self.requests = f"{checkpoint.rstrip('/')}-flush-requests"
        # How the source of the requests shows in a progress: Spark writes file:///x as file:/x.
        self.requests_path = urlsplit(self.requests).path
        prepare_requests(spark, self.requests)
        output = buffered(frame, sink.key, options.max_interval_ms, clock, flush_requests(spark, self.requests))
        self.frame = output.observe(
            METRICS,
            F.count(F.lit(1)).alias("emitted"),
            *(F.max(F.when(F.col(FLUSH_CAUSE) == cause, 1).otherwise(0)).alias(cause) for cause in CAUSES),
        ).drop(FLUSH_CAUSE)

    def request(self, cause: str) -> None:
        request_flush(self.spark, self.requests, cause)

    def close(self, failed: bool) -> None:
        """Nothing to do once the query has stopped: the buffer is in the state store, committed with each batch."""

    def data_rows(self, progress: Any) -> int:
        """The rows one micro-batch read from the query's sources, its flush requests left out."""
        return input_rows(progress, leave_out=self.requests_path)

    def buffer_report(self, progress: list[dict[str, Any]]) -> dict[str, Any]:
        """From the progress of the runs of this sink's query: records in (the rows of its sources, flush requests
        left out), records emitted, and flushes by cause."""
        observed = [observed_metrics(p, METRICS) for p in progress]
        metrics = [row for row in observed if row is not None]
        records_in = sum(self.data_rows(p) for p in progress)
        return {
            "buffer": {
                "store": STATE_STORE,
                "records_in": records_in,
                "records_emitted": sum(m.get("emitted") or 0 for m in metrics),
                "flushes": {cause: sum(m.get(cause) or 0 for m in metrics) for cause in CAUSES},
            }
        }
