"""The options of a bounded streaming job (a compiled plan's execution, a streaming aggregation): Flink's job-level
options by their names in ``configuration``, the sinks' connections, and how long a run lasts.

Each option name given is checked against those the job knows: an option misspelt would be ignored, and
``table.exec.state.ttl`` misspelt keeps state for ever.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.errors import SpecError
from spark_tables.core.streaming.flush import (
    DURABLE_STORE_OPTION,
    MAX_ENTRIES_OPTION,
    MAX_INTERVAL_OPTION,
    MEMORY_BUFFER_ONLY_OPTION,
    FlushOptions,
)
from spark_tables.core.streaming.sources import KafkaTopicSource

#: Flink's option of how many partitions each stateful operator's state has.
PARALLELISM_OPTION = "table.exec.resource.default-parallelism"
#: The options every streaming job knows.
STREAMING_OPTIONS = (
    PARALLELISM_OPTION,
    MAX_INTERVAL_OPTION,
    MEMORY_BUFFER_ONLY_OPTION,
    MAX_ENTRIES_OPTION,
    DURABLE_STORE_OPTION,
)


def check_option_names(configuration: dict[str, Any], known: Sequence[str], where: str) -> None:
    """Raise ``SpecError`` in one line for the first name that is not in ``known``, naming the nearest known one."""
    for name in sorted(configuration):
        if name in known:
            continue
        nearest = difflib.get_close_matches(str(name), known, n=1, cutoff=0.0)
        raise SpecError(
            f"{where}: {name!r} is not an option this provider knows: did you mean {nearest[0]!r}? "
            f"(known: {', '.join(known)})"
        )


@dataclass(frozen=True)
class StreamingOptions:
    """What a streaming job needs besides its query.

    :param configuration: job-level options, Flink's names: ``table.exec.resource.default-parallelism`` (the
        partitions of every stateful operator's state) and FLIP-365's buffered output (``core.streaming.flush``).
    :param connections: each PostgreSQL sink's connection settings by sink name (with passwords: never logged).
    :param sources: the Kafka topics the job's SQL may read, by the names it reads them by.
    :param kafka_connections: Spark's Kafka connector options (``core.kafka.spark_options``) of each Kafka
        connection the job's sources name, by connection id (with passwords: never logged).
    :param run_for: how long a run keeps its queries running, a micro-batch every ``trigger_interval`` (a
        duration); empty: available-now, what the sources hold when it starts, then the end.
    """

    #: The option names this kind of job knows.
    KNOWN_OPTIONS: ClassVar[tuple[str, ...]] = STREAMING_OPTIONS

    configuration: dict[str, str] = field(default_factory=dict)
    connections: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    sources: tuple[KafkaTopicSource, ...] = ()
    kafka_connections: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    run_for: str = ""
    trigger_interval: str = "1 s"

    def __post_init__(self) -> None:
        if not isinstance(self.configuration, dict):
            raise SpecError("options: configuration must map option names to values")
        object.__setattr__(self, "configuration", {str(k): str(v) for k, v in self.configuration.items()})
        check_option_names(self.configuration, self.KNOWN_OPTIONS, "configuration")
        object.__setattr__(
            self,
            "sources",
            tuple(
                source if isinstance(source, KafkaTopicSource) else KafkaTopicSource.from_dict(source, "options")
                for source in self.sources
            ),
        )
        self.flush  # noqa: B018 (bad flush options fail here, before the job is submitted)
        self.state_partitions  # noqa: B018
        if self.run_for and self.run_for_ms < 1:
            raise SpecError(f"run_for={self.run_for!r} is too short: give at least 1 ms, or leave it empty")
        if self.trigger_interval_ms < 1:
            raise SpecError(f"trigger_interval={self.trigger_interval!r} is too short: give at least 1 ms")

    @property
    def flush(self) -> FlushOptions:
        """Whether and how the job's aggregation results are buffered (FLIP-365)."""
        return FlushOptions.from_configuration(self.configuration)

    @property
    def run_for_ms(self) -> int:
        """How long a run lasts, in milliseconds; 0: available-now."""
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "configuration": self.configuration,
            "connections": self.connections,
            "sources": [source.to_dict() for source in self.sources],
            "kafka_connections": self.kafka_connections,
            "run_for": self.run_for,
            "trigger_interval": self.trigger_interval,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Any:
        """The options of ``data`` (a dict as ``to_dict`` writes it, or the options themselves), checked."""
        if type(data) is cls:
            return data
        if isinstance(data, StreamingOptions):  # another job's options: only if they hold nothing of their own
            data = data.to_dict()
        if not isinstance(data, dict):
            raise SpecError("options must be an object")
        unknown = sorted(set(data) - {option.name for option in fields(cls)})
        if unknown:
            raise SpecError(f"options: unknown field(s) {unknown}: a {cls.__name__} has {sorted(cls().to_dict())}")
        return cls(**data)
