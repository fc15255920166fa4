"""A compiled plan's nodes as streaming DataFrames, node by node, on Spark's public DataFrame API.

The compiler builds the same frames as it adds nodes, so that Spark's analyzer names and types every node's output
(and refuses unknown tables and columns) before anything runs; ``EXPLAIN PLAN`` builds them to validate a plan, and
``EXECUTE PLAN`` to run it. Every frame is a changelog: the node's columns and the row kind (``changelog``).

Which frames only ever insert is inferred node by node, as Flink's planner infers changelog modes: a source's rows
are inserts (but a Delta table's change data feed's, ``jobs.table_format``), and so are those of a keep-first
deduplication, of an inner join of insert-only inputs and of a left
join on Spark's join (which sends a left row's null-padded row only once it expired unmatched); an aggregation, a
keep-last deduplication and a left join on transform-with-state update their results. A join or a deduplication
runs on the implementation its node names (``core.plan.implementations``); one that cannot run there is refused here. A
deduplication and a catalog sink take insert-only input (refused here, before any query starts), and an aggregation
over insert-only input keeps only the extreme value for MIN and MAX.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession

from spark_tables.core.errors import SpecError, one_line
from spark_tables.core.plan.implementations import (
    SPARK_DROP_DUPLICATES,
    SPARK_STREAM_JOIN,
    check_deduplicate_implementation,
    check_join_implementation,
)
from spark_tables.core.plan.nodes import Calc, Column, Deduplicate, GroupAggregate, Join, Node, Sink, SourceScan
from spark_tables.core.streaming.sinks import PlanSink, TableSink
from spark_tables.jobs.changelog import ROW_KIND
from spark_tables.jobs.plan.deduplicate import deduplicate, spark_drop_duplicates
from spark_tables.jobs.plan.group_aggregate import group_aggregate
from spark_tables.jobs.plan.join import join
from spark_tables.jobs.plan.spark_join import spark_join
from spark_tables.jobs.streaming.clock import Clock
from spark_tables.jobs.streaming.sources.streams import stream_source


class Pipeline:
    """The frames of a plan's nodes, by id; stateful nodes apply their own TTLs (``job_ttl`` where a node has no
    ``state``), with ``clock`` as processing time; scans of Kafka topics through ``kafka_connections`` (Spark's
    options of each connection their sources name, by connection id)."""

    def __init__(
        self,
        spark: SparkSession,
        job_ttl: timedelta,
        clock: Clock,
        kafka_connections: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.spark = spark
        self.kafka_connections = kafka_connections or {}
        self.job_ttl = job_ttl
        self.clock = clock
        self.frames: dict[int, DataFrame] = {}
        #: Whether a node's frame only ever inserts rows (no update or delete), by id.
        self.insert_only: dict[int, bool] = {}
        self._source_inserts_only: dict[int, bool] = {}

    def add(self, node: Node) -> DataFrame:
        """Build ``node``'s frame from its inputs' (already added); Spark's analysis errors become one line naming
        the node."""
        try:
            frame = self._frame(node)
            frame.schema  # noqa: B018 (analysis: unknown tables, columns and types fail here, not when running)
        except SpecError:
            raise
        except Exception as err:
            raise SpecError(f"node {node.id} ({node.TYPE}): {one_line(err)}") from None
        self.frames[node.id] = frame
        self.insert_only[node.id] = self._inserts_only(node)
        return frame

    def check_sink(self, sink: PlanSink, input_id: int) -> None:
        """``SpecError`` when ``sink`` cannot take node ``input_id``'s rows: a catalog table takes inserts only."""
        if isinstance(sink, TableSink) and not self.insert_only[input_id]:
            raise SpecError(
                "the query updates its results (an aggregation, a keep-last deduplication or a left join on "
                f"transform-with-state), but "
                f"{sink.name} is a catalog table appended to, which takes inserted rows only: write into a "
                "PostgresUpsertSink, or declare the table kept by key (a TableUpsertSink in catalog_sinks)"
            )

    def columns(self, node_id: int) -> tuple[Column, ...]:
        """The output schema of a node: its frame's columns but the row kind, with Spark's types."""
        return tuple(
            Column(field.name, field.dataType.simpleString(), field.nullable)
            for field in self.frames[node_id].schema.fields
            if field.name != ROW_KIND
        )

    def _frame(self, node: Node) -> DataFrame:
        inputs = [self.frames[input_id] for input_id in node.inputs]
        if isinstance(node, SourceScan):
            streamed = stream_source(node.table, node.source, self.kafka_connections).changes(self.spark)
            self._source_inserts_only[node.id] = streamed.insert_only
            return streamed.changes
        if isinstance(node, Calc):
            frame = inputs[0] if node.condition is None else inputs[0].where(node.condition)
            return frame.selectExpr(*node.projection, ROW_KIND)
        if isinstance(node, Sink):
            return inputs[0]
        ttls = [state.ttl_ms for state in node.effective_state(self.job_ttl)]
        if isinstance(node, Deduplicate):
            if not self.insert_only[node.inputs[0]]:
                raise SpecError(
                    f"node {node.id} ({node.TYPE}) needs an insert-only input, but node {node.inputs[0]} updates its "
                    "rows (an aggregation, a keep-last deduplication or a left join on transform-with-state): "
                    "deduplicate before it"
                )
            check_deduplicate_implementation(node.implementation, node.keep, ttls[0], f"node {node.id} ({node.TYPE})")
            if node.implementation == SPARK_DROP_DUPLICATES:
                return spark_drop_duplicates(inputs[0], node.key)
            return deduplicate(inputs[0], node.key, node.keep, ttls[0], self.clock)
        if isinstance(node, GroupAggregate):
            return group_aggregate(
                inputs[0], node.key, node.aggregates, ttls[0], self.clock, insert_only=self.insert_only[node.inputs[0]]
            )
        if isinstance(node, Join):
            check_join_implementation(
                node.implementation,
                node.join_type,
                [self.insert_only[input_id] for input_id in node.inputs],
                ttls[0],
                f"node {node.id} ({node.TYPE})",
            )
            operator = spark_join if node.implementation == SPARK_STREAM_JOIN else join
            return operator(
                inputs[0],
                inputs[1],
                left_key=node.left_key,
                right_key=node.right_key,
                left_ttl_ms=ttls[0],
                right_ttl_ms=ttls[1],
                clock=self.clock,
                kind=node.join_type.lower(),
            )
        raise SpecError(f"node {node.id}: type {node.TYPE} cannot be executed")  # NODE_TYPES and this agree

    def _inserts_only(self, node: Node) -> bool:
        inputs = [self.insert_only[input_id] for input_id in node.inputs]
        if isinstance(node, SourceScan):
            return self._source_inserts_only[node.id]
        if isinstance(node, Calc | Sink):
            return inputs[0]
        if isinstance(node, Deduplicate):
            return node.keep == "first"
        if isinstance(node, Join):
            return all(inputs) and (node.join_type == "INNER" or node.runs_on == SPARK_STREAM_JOIN)
        return False
