"""A ``plan`` job: one plan statement (compile, explain, execute) run in one Spark application."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.state import STATE_TTL_OPTION, default_ttl
from spark_tables.core.plan.statements import PlanStatement
from spark_tables.core.streaming.options import STREAMING_OPTIONS, StreamingOptions
from spark_tables.core.streaming.sinks import KafkaUpsertSink, PostgresUpsertSink, TableUpsertSink, sink_from_dict

#: Flink's option that lets COMPILE PLAN replace an existing plan file.
FORCE_RECOMPILE_OPTION = "table.plan.force-recompile"


@dataclass(frozen=True)
class PlanOptions(StreamingOptions):
    """What plan statements need besides their text: a streaming job's options, and the plan's own.

    :param configuration: besides a streaming job's options, ``table.exec.state.ttl`` (every stateful node's default
        TTL) and ``table.plan.force-recompile`` (``true``: COMPILE PLAN replaces an existing plan file).
    :param postgres_sinks: the PostgreSQL tables ``INSERT INTO`` may name, for compiling.
    :param table_upsert_sinks: the catalog tables ``INSERT INTO`` may name that are kept by key, for compiling.
    :param kafka_sinks: the Kafka topics ``INSERT INTO`` may name, kept by key (upsert-kafka), for compiling.
    :param checkpoints: root of the executed plans' checkpoints, a folder per plan.
    :param sink_warnings: what the Airflow side found wrong, but not fatal, with the Kafka sinks' topics (one not
        compacted), for EXPLAIN to show.
    """

    KNOWN_OPTIONS: ClassVar[tuple[str, ...]] = (STATE_TTL_OPTION, FORCE_RECOMPILE_OPTION, *STREAMING_OPTIONS)

    postgres_sinks: tuple[PostgresUpsertSink, ...] = ()
    table_upsert_sinks: tuple[TableUpsertSink, ...] = ()
    kafka_sinks: tuple[KafkaUpsertSink, ...] = ()
    checkpoints: str = ""
    sink_warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        default_ttl(self.configuration)  # a bad table.exec.state.ttl fails before anything runs
        if self.configuration.get(FORCE_RECOMPILE_OPTION, "false").lower() not in ("true", "false"):
            raise SpecError(f"{FORCE_RECOMPILE_OPTION} must be true or false")
        for field_name, kind in (
            ("postgres_sinks", PostgresUpsertSink),
            ("table_upsert_sinks", TableUpsertSink),
            ("kafka_sinks", KafkaUpsertSink),
        ):
            sinks = tuple(
                sink if isinstance(sink, kind) else sink_from_dict(sink, "plan options")
                for sink in getattr(self, field_name)
            )
            if not all(isinstance(sink, kind) for sink in sinks):
                raise SpecError(f"plan options: {field_name} must hold {kind.__name__} declarations")
            object.__setattr__(self, field_name, sinks)
        object.__setattr__(self, "sink_warnings", tuple(str(warning) for warning in self.sink_warnings))

    @property
    def force_recompile(self) -> bool:
        return self.configuration.get(FORCE_RECOMPILE_OPTION, "false").lower() == "true"

    def to_dict(self) -> dict[str, Any]:
        return {
            **super().to_dict(),
            "postgres_sinks": [sink.to_dict() for sink in self.postgres_sinks],
            "table_upsert_sinks": [sink.to_dict() for sink in self.table_upsert_sinks],
            "kafka_sinks": [sink.to_dict() for sink in self.kafka_sinks],
            "checkpoints": self.checkpoints,
            "sink_warnings": list(self.sink_warnings),
        }


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
