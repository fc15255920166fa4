"""A streaming job's options (``core.streaming.options``): the names each kind of job knows, and options of one kind
of job refused by another."""

from __future__ import annotations

import pytest

from spark_tables.core.aggregation.job import StreamingAggregationJob
from spark_tables.core.errors import SpecError
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.streaming.options import StreamingOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink

SINK = PostgresUpsertSink(name="counts", conn_id="pg", table="public.counts", key=("k",))


def test_a_streaming_aggregation_refuses_a_plan_s_own_options_by_name() -> None:
    """Spark's own aggregation keeps no TTL: ``table.exec.state.ttl`` there would be ignored, so it is refused."""
    with pytest.raises(SpecError) as raised:
        StreamingOptions(configuration={"table.exec.state.ttl": "1 h"})
    assert str(raised.value).startswith(
        "configuration: 'table.exec.state.ttl' is not an option this provider knows: did you mean "
    )
    assert "table.exec.state.ttl" not in str(raised.value).split("(known: ")[1]
    assert PlanOptions(configuration={"table.exec.state.ttl": "1 h"}).configuration == {"table.exec.state.ttl": "1 h"}


def test_options_round_trip_and_a_plan_s_options_are_no_aggregation_s() -> None:
    options = StreamingOptions(configuration={"execution.flush.max-interval": "10 s"}, run_for="1 min")
    assert StreamingOptions.from_dict(options.to_dict()) == options
    plan_options = PlanOptions(checkpoints="file:///checkpoints", postgres_sinks=(SINK,))
    assert PlanOptions.from_dict(plan_options.to_dict()) == plan_options
    plan_fields = r"\['checkpoints', 'kafka_sinks', 'postgres_sinks', 'sink_warnings', 'table_upsert_sinks'\]"
    with pytest.raises(SpecError, match=rf"^options: unknown field\(s\) {plan_fields}: a "):
        StreamingAggregationJob(query="SELECT 1", sink=SINK, checkpoint="/c", options=plan_options)
