"""FLIP-365's options and which results may be buffered: every bad setting refused in one line, before a job."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest

from spark_tables.core.aggregation.idempotent import SPARK_IDEMPOTENT_AGGREGATES
from spark_tables.core.durations import format_duration
from spark_tables.core.errors import SpecError
from spark_tables.core.plan.aggregates import FUNCTIONS
from spark_tables.core.plan.document import CompiledPlan
from spark_tables.core.plan.idempotence import buffered_aggregation
from spark_tables.core.plan.job import PlanOptions
from spark_tables.core.plan.nodes import Sink
from spark_tables.core.streaming.flush import DEFAULT_MAX_ENTRIES, FlushOptions, buffer_store
from tests.unit.test_plan_document import example_2


def test_buffering_is_off_unless_the_interval_is_set() -> None:
    assert FlushOptions.from_configuration({}) == FlushOptions()
    assert not FlushOptions().enabled


def test_the_options_read_flinks_names_and_spellings() -> None:
    options = FlushOptions.from_configuration(
        {
            "execution.flush.max-interval": "2 min",
            "execution.flush.memory-buffer-only": "TRUE",
            "state.backend.cache.max-entries-num": "500",
        }
    )
    assert options == FlushOptions(timedelta(minutes=2), True, 500)
    assert options.enabled and options.max_interval_ms == 120_000
    iso = FlushOptions.from_configuration({"execution.flush.max-interval": "PT30S"})
    assert iso == FlushOptions(timedelta(seconds=30), False, DEFAULT_MAX_ENTRIES)


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ({"execution.flush.max-interval": "abc"}, "execution.flush.max-interval"),
        ({"execution.flush.max-interval": "-1 ms"}, "execution.flush.max-interval"),
        ({"execution.flush.max-interval": "0 ms"}, "is too short: give at least 1 ms, or leave it unset"),
        (
            {"execution.flush.max-interval": "1 s", "execution.flush.memory-buffer-only": "yes"},
            "execution.flush.memory-buffer-only='yes' is invalid: give true or false",
        ),
        (
            {"execution.flush.max-interval": "1 s", "state.backend.cache.max-entries-num": "0"},
            "state.backend.cache.max-entries-num='0' is invalid: give a whole number of entries from 1",
        ),
        (
            {"execution.flush.memory-buffer-only": "true"},
            "execution.flush.memory-buffer-only applies to buffered output: set execution.flush.max-interval too",
        ),
        (
            {"state.backend.cache.max-entries-num": "10"},
            "state.backend.cache.max-entries-num applies to buffered output: set execution.flush.max-interval too",
        ),
        (
            {"execution.flush.durable-store": "log"},
            "execution.flush.durable-store applies to buffered output: set execution.flush.max-interval too",
        ),
        (
            {"execution.flush.max-interval": "1 s", "execution.flush.durable-store": "rocksdb"},
            "execution.flush.durable-store='rocksdb' is invalid: use log or state-store",
        ),
        (
            {
                "execution.flush.max-interval": "1 s",
                "execution.flush.durable-store": "log",
                "execution.flush.memory-buffer-only": "true",
            },
            "execution.flush.durable-store names a durable buffer's store, but execution.flush.memory-buffer-only is "
            "true: leave one of them out",
        ),
    ],
)
def test_bad_options_fail_in_one_line(configuration: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError) as raised:
        FlushOptions.from_configuration(configuration)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(SpecError):  # a plan job refuses them when it is declared, before it is submitted
        PlanOptions(configuration=configuration)


def test_a_durable_buffer_is_logged_in_front_of_postgresql_in_a_job_of_its_own_else_in_the_state_store() -> None:
    durable = FlushOptions.from_configuration({"execution.flush.max-interval": "1 min"})
    assert buffer_store(durable, "counts", postgres_sink=True, session_mode=False) == "log"
    assert buffer_store(durable, "counts", postgres_sink=False, session_mode=False) == "state-store"
    assert buffer_store(durable, "counts", postgres_sink=True, session_mode=True) == "state-store"
    chosen = FlushOptions.from_configuration(
        {"execution.flush.max-interval": "1 min", "execution.flush.durable-store": "state-store"}
    )
    assert buffer_store(chosen, "counts", postgres_sink=True, session_mode=False) == "state-store"
    memory = FlushOptions.from_configuration(
        {"execution.flush.max-interval": "1 min", "execution.flush.memory-buffer-only": "true"}
    )
    assert buffer_store(memory, "counts", postgres_sink=True, session_mode=False) == "memory"
    logged = FlushOptions.from_configuration(
        {"execution.flush.max-interval": "1 min", "execution.flush.durable-store": "log"}
    )
    for options, option in (
        (memory, "execution.flush.memory-buffer-only"),
        (logged, "execution.flush.durable-store=log"),
    ):
        with pytest.raises(SpecError) as raised:
            buffer_store(options, "counts", postgres_sink=False, session_mode=False)
        assert str(raised.value) == (
            f"sink counts: {option} buffers in front of a PostgreSQL sink only (a catalog table takes a version per "
            "flush, a Kafka topic a message a key, from a micro-batch): leave it unset"
        )


def test_plan_options_carry_the_flush_options() -> None:
    options = PlanOptions(configuration={"execution.flush.max-interval": "10 s"})
    assert options.flush == FlushOptions(timedelta(seconds=10))
    assert PlanOptions().flush == FlushOptions()


def test_every_aggregate_a_plan_computes_is_idempotent() -> None:
    assert set(FUNCTIONS) <= SPARK_IDEMPOTENT_AGGREGATES


def _plan(edit: Any = None) -> CompiledPlan:
    data = copy.deepcopy(example_2())
    if edit:
        edit(data)
    return CompiledPlan.from_dict(data)


def _sink(plan: CompiledPlan) -> Sink:
    return next(node for node in plan.nodes if isinstance(node, Sink))


def test_an_aggregations_results_may_be_buffered() -> None:
    plan = _plan()
    assert buffered_aggregation(plan, _sink(plan)).id == 4


def test_the_rows_of_a_join_may_not_be_buffered() -> None:
    def join_into_sink(data: dict[str, Any]) -> None:
        data["nodes"] = [node for node in data["nodes"] if node["id"] != 4]
        data["nodes"][-1]["inputs"] = [3]

    plan = _plan(join_into_sink)
    with pytest.raises(SpecError) as raised:
        buffered_aggregation(plan, _sink(plan))
    assert str(raised.value) == (
        "execution.flush.max-interval buffers idempotent results only (an aggregation's, FLIP-365), but sink counts "
        "takes the rows of node 3 (stream-exec-join), each of which counts: run this plan without "
        "execution.flush.max-interval"
    )


def test_a_plan_runs_available_now_unless_given_a_time() -> None:
    assert PlanOptions().run_for_ms == 0 and PlanOptions().trigger_interval_ms == 1000
    timed = PlanOptions(run_for="10 min", trigger_interval="500 ms")
    assert (timed.run_for_ms, timed.trigger_interval_ms) == (600_000, 500)
    assert PlanOptions.from_dict(timed.to_dict()) == timed


def test_times_finer_than_a_millisecond_round_up_never_to_zero() -> None:
    short = PlanOptions(run_for="1 ns", trigger_interval="1500 us")
    assert (short.run_for_ms, short.trigger_interval_ms) == (1, 2)  # run_for 0 would mean available-now
    flush = FlushOptions.from_configuration({"execution.flush.max-interval": "1 ns"})
    assert flush.max_interval == timedelta(microseconds=1) and flush.max_interval_ms == 1
    written = format_duration(flush.max_interval)  # as a plan writes it back
    assert FlushOptions.from_configuration({"execution.flush.max-interval": written}) == flush


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_for": "0 s"}, "run_for='0 s' is too short: give at least 1 ms, or leave it empty"),
        ({"run_for": "later"}, "run_for"),
        ({"trigger_interval": "0 ms"}, "trigger_interval='0 ms' is too short: give at least 1 ms"),
    ],
)
def test_bad_run_times_fail_in_one_line(fields: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError) as raised:
        PlanOptions(**fields)
    assert message in str(raised.value) and "\n" not in str(raised.value)
