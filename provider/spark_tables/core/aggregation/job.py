"""A ``streaming_aggregation`` job: one Spark SQL aggregation over streams, upserted by key into PostgreSQL
or a catalog table, with FLIP-365's buffered output when ``execution.flush.max-interval`` is set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import KeyedSink, sink_from_dict


@dataclass(frozen=True)
class StreamingAggregationJob:
    """Runs ``query`` as a bounded streaming query (available-now, or for ``options.run_for``) from ``checkpoint``.

    :param query: one ``SELECT ... FROM STREAM(table) [WATERMARK column DELAY OF interval] ... GROUP BY ...``, in
        Spark SQL: Spark's own aggregation computes it, and each micro-batch's changed groups go to the sink.
    :param sink: the PostgreSQL table (``PostgresUpsertSink``), catalog table (``TableUpsertSink``) or Kafka topic
        (``KafkaUpsertSink``) the results are upserted into, by its key.
    :param checkpoint: the query's checkpoint folder, kept from run to run: each run resumes where the last ended.
    :param options: the job-level options (FLIP-365's in ``configuration``), the sink's connection settings by sink
        name, ``run_for`` and ``trigger_interval``.
    """

    kind: ClassVar[str] = "streaming_aggregation"
    query: str
    sink: KeyedSink
    checkpoint: str
    options: StreamingOptions = field(default_factory=StreamingOptions)

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not self.query.strip().rstrip(";").strip():
            raise SpecError("streaming aggregation: query is empty: give one SELECT ... FROM STREAM(table) GROUP BY")
        sink = self.sink if isinstance(self.sink, KeyedSink) else sink_from_dict(self.sink, "aggregation")
        if not isinstance(sink, KeyedSink):
            raise SpecError(
                f"streaming aggregation: sink {sink.name} must be a PostgresUpsertSink, a TableUpsertSink or a "
                "KafkaUpsertSink (upserted by key)"
            )
        object.__setattr__(self, "sink", sink)
        if not isinstance(self.checkpoint, str) or not self.checkpoint.strip():
            raise SpecError("streaming aggregation: checkpoint is empty: give the folder of the query's checkpoint")
        object.__setattr__(self, "options", StreamingOptions.from_dict(self.options))
