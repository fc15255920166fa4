"""A ``plan`` job: one plan statement (compile, explain, execute) run in one Spark application."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.errors import SpecError
from spark_tables.core.plan.configuration import FORCE_RECOMPILE_OPTION, PARALLELISM_OPTION, check_option_names
from spark_tables.core.plan.state import default_ttl
from spark_tables.core.plan.statements import PlanStatement
from spark_tables.core.streaming.flush import FlushOptions
from spark_tables.core.streaming.sinks import PostgresUpsertSink, sink_from_dict


@dataclass(frozen=True)
class PlanOptions:
    """What plan statements need besides their text.

    :param configuration: job-level options: ``table.exec.state.ttl`` (every stateful node's default TTL),
        ``table.plan.force-recompile`` (``true``: COMPILE PLAN replaces an existing plan file) and FLIP-365's
        buffered output (``core.streaming.flush``).
    :param postgres_sinks: the PostgreSQL tables ``INSERT INTO`` may name, for compiling.
    :param connections: each PostgreSQL sink's connection settings by sink name, for executing (with passwords:
        never logged).
    :param checkpoints: root of the executed plans' checkpoints, a folder per plan.
    :param run_for: how long ``EXECUTE PLAN`` keeps its queries running, a micro-batch every ``trigger_interval``
        (a duration); empty: available-now, what the sources hold when it starts, then the end.
    """

    configuration: dict[str, str] = field(default_factory=dict)
    postgres_sinks: tuple[PostgresUpsertSink, ...] = ()
    connections: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    checkpoints: str = ""
    run_for: str = ""
    trigger_interval: str = "1 s"

    def __post_init__(self) -> None:
        if not isinstance(self.configuration, dict):
            raise SpecError("plan options: configuration must map option names to values")
        object.__setattr__(self, "configuration", {str(k): str(v) for k, v in self.configuration.items()})
        check_option_names(self.configuration, "configuration")
        default_ttl(self.configuration)  # a bad table.exec.state.ttl fails before anything runs
        if self.configuration.get(FORCE_RECOMPILE_OPTION, "false").lower() not in ("true", "false"):
            raise SpecError(f"{FORCE_RECOMPILE_OPTION} must be true or false")
        self.flush  # noqa: B018 (bad flush options fail here, before the job is submitted)
        self.state_partitions  # noqa: B018
        if self.run_for and self.run_for_ms < 1:
            raise SpecError(f"run_for={self.run_for!r} is too short: give at least 1 ms, or leave it empty")
        if self.trigger_interval_ms < 1:
            raise SpecError(f"trigger_interval={self.trigger_interval!r} is too short: give at least 1 ms")
        sinks = tuple(
            sink if isinstance(sink, PostgresUpsertSink) else sink_from_dict(sink, "plan options")
            for sink in self.postgres_sinks
        )
        if not all(isinstance(sink, PostgresUpsertSink) for sink in sinks):
            raise SpecError("plan options: postgres_sinks must hold PostgresUpsertSink declarations")
        object.__setattr__(self, "postgres_sinks", sinks)

    @property
    def flush(self) -> FlushOptions:
        """Whether and how the plan's aggregation results are buffered (FLIP-365)."""
        return FlushOptions.from_configuration(self.configuration)

    @property
    def run_for_ms(self) -> int:
        """How long an execution runs, in milliseconds; 0: available-now."""
        return whole_milliseconds(parse_duration(self.run_for, "run_for")) if self.run_for else 0

    @property
    def trigger_interval_ms(self) -> int:
        return whole_milliseconds(parse_duration(self.trigger_interval, "trigger_interval"))

    @property
    def state_partitions(self) -> int | None:
        """Flink's ``table.exec.resource.default-parallelism``: the partitions of every operator's state; None: the
        application's cores."""
        configured = self.configuration.get(PARALLELISM_OPTION)
        if configured is None:
            return None
        if not configured.isdigit() or int(configured) < 1:
            raise SpecError(f"{PARALLELISM_OPTION}={configured!r} is invalid: give a whole number from 1")
        return int(configured)

    @property
    def force_recompile(self) -> bool:
        return self.configuration.get(FORCE_RECOMPILE_OPTION, "false").lower() == "true"

    def to_dict(self) -> dict[str, Any]:
        return {
            "configuration": self.configuration,
            "postgres_sinks": [sink.to_dict() for sink in self.postgres_sinks],
            "connections": self.connections,
            "checkpoints": self.checkpoints,
            "run_for": self.run_for,
            "trigger_interval": self.trigger_interval,
        }

    @classmethod
    def from_dict(cls, data: Any) -> PlanOptions:
        if isinstance(data, PlanOptions):
            return data
        if not isinstance(data, dict):
            raise SpecError("plan options must be an object")
        return cls(**data)


@dataclass(frozen=True)
class PlanJob:
    """Runs one plan statement: ``COMPILE [AND EXECUTE] PLAN``, ``EXECUTE PLAN`` or ``EXPLAIN PLAN``, read on the
    Airflow side (``tasks.sql_reader.read_plan_statement``)."""

    kind: ClassVar[str] = "plan"
    statement: PlanStatement
    options: PlanOptions = field(default_factory=PlanOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "statement", PlanStatement.from_dict(self.statement))
        object.__setattr__(self, "options", PlanOptions.from_dict(self.options))
        if self.statement.executes and not self.options.checkpoints:
            raise SpecError("plan job: executing a plan needs options.checkpoints, the root of its checkpoints")
