"""The ``lookup_join`` and ``lookup_reload`` jobs (FLIP-221).

A lookup join enriches each row of a probe side, a query or a stream, with the rows its lookup table holds for
the row's key: through a per-worker partial cache (``PARTIAL``), per-key queries (``NONE``) or the table's
current full-cache snapshot (``FULL``). A reload scans the whole table into a new snapshot and publishes it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, ClassVar

from spark_tables.core.durations import parse_duration
from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier, checked_columns
from spark_tables.core.lookup.options import CacheMode
from spark_tables.core.lookup.table import LookupSpec
from spark_tables.core.row_source import checked_row_source
from spark_tables.core.streaming.sources import KafkaTopicSource

JOIN_TYPES = ("left", "inner")
#: How a batch join's output meets a table already there: ``error`` (the default: fail, naming the other two), add
#: to it, or replace it.
ERROR_IF_EXISTS = "error"
WRITE_MODES = (ERROR_IF_EXISTS, "append", "overwrite")
#: A streaming probe's trigger: drain what is there and stop, or a micro-batch every interval until stopped.
AVAILABLE_NOW = "available-now"
_STREAM_FIELDS = {"format", "path", "options", "schema"}


@dataclass(frozen=True)
class StreamSource:
    """A Structured Streaming probe side: ``spark.readStream.format(format).schema(schema).options(...).load(path)``."""

    format: str
    path: str | None = None
    options: dict[str, str] = field(default_factory=dict)
    schema: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> StreamSource:
        if isinstance(data, StreamSource):
            return data
        if not isinstance(data, dict) or "format" not in data or not set(data) <= _STREAM_FIELDS:
            raise SpecError(
                f"lookup join: probe_stream must be a KafkaTopicSource, or an object with format and any of "
                f"{sorted(_STREAM_FIELDS)}"
            )
        return cls(**data)


@dataclass(frozen=True)
class LookupJoinJob:
    """``probe JOIN lookup ON probe.on = lookup.key``; the result is written to ``output`` or sampled back.

    :param on: the probe side's columns, matched in order to the lookup table's key columns.
    :param probe: a query whose rows are enriched, or
    :param probe_stream: a streaming source whose rows are enriched micro-batch by micro-batch into ``output``
        (with ``checkpoint``): Spark's streaming reader of files (``StreamSource``), or a Kafka topic
        (``KafkaTopicSource``, its offsets kept in the checkpoint); a long-running stream picks up each newly
        published FULL snapshot.
    :param kafka_connections: a Kafka probe's connection as Spark's Kafka connector options, by connection id (with
        passwords: never logged).
    :param metrics_uri: the folder where each executor worker leaves its cache metrics for the driver to add up.
    """

    kind: ClassVar[str] = "lookup_join"
    lookup: LookupSpec
    on: tuple[str, ...]
    metrics_uri: str
    probe: str | None = None
    probe_stream: StreamSource | KafkaTopicSource | None = None
    join_type: str = "left"
    output: str | None = None
    mode: str = ERROR_IF_EXISTS
    checkpoint: str | None = None
    trigger: str = AVAILABLE_NOW
    max_result_rows: int = 20
    kafka_connections: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "lookup", LookupSpec.from_dict(self.lookup))
        on = checked_columns(self.on, "lookup join: on", required=True)
        if len(on) != len(self.lookup.source.key):
            raise SpecError(
                f"lookup join: on={list(on)} has {len(on)} column(s) but lookup table {self.lookup.name} has key "
                f"{list(self.lookup.source.key)}: give one probe column per key column, in order"
            )
        object.__setattr__(self, "on", on)
        if (self.probe is None) == (self.probe_stream is None):
            raise SpecError("lookup join: give exactly one of probe (a query) or probe_stream (a streaming source)")
        if self.probe is not None:
            object.__setattr__(self, "probe", checked_row_source(self.probe, None, "lookup join: probe"))
        else:
            object.__setattr__(self, "probe_stream", _probe_stream(self.probe_stream))
            if self.output is None or self.checkpoint is None:
                raise SpecError("lookup join: a probe_stream needs output (a table) and checkpoint (a folder URI)")
            if self.trigger != AVAILABLE_NOW:
                parse_duration(self.trigger, "lookup join: trigger")
        if self.join_type not in JOIN_TYPES:
            raise SpecError(f"lookup join: join_type {self.join_type!r} is invalid: use one of {list(JOIN_TYPES)}")
        if self.mode not in WRITE_MODES:
            raise SpecError(f"lookup join: mode {self.mode!r} is invalid: use one of {list(WRITE_MODES)}")
        if self.output is not None:
            TableIdentifier.parse(self.output)


@dataclass(frozen=True)
class LookupReloadJob:
    """Scan a lookup table whole into a new full-cache snapshot and publish it; the old one stays if this fails.

    :param scheduled_for: ISO time of the reload time this load is for, when a schedule fired it.
    :param num_partitions: parallel reads of the table (Spark's JDBC reader); default the application's parallelism.
    :param retained: snapshots kept, the current one included; older ones are deleted after a publish.
    """

    kind: ClassVar[str] = "lookup_reload"
    lookup: LookupSpec
    scheduled_for: str | None = None
    num_partitions: int | None = None
    retained: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "lookup", LookupSpec.from_dict(self.lookup))
        cache = self.lookup.lookup_options.cache
        if cache is not CacheMode.FULL:
            raise SpecError(
                f"lookup reload: lookup table {self.lookup.name} has lookup.cache={cache}: only a FULL cache is "
                "reloaded; set lookup.cache=FULL"
            )
        if self.num_partitions is not None and (
            isinstance(self.num_partitions, bool) or not isinstance(self.num_partitions, int) or self.num_partitions < 1
        ):
            raise SpecError(
                f"lookup reload: num_partitions={self.num_partitions!r} is invalid: use a whole number >= 1"
            )
        if self.scheduled_for is not None:
            object.__setattr__(self, "scheduled_for", _reload_time(self.scheduled_for))
        if isinstance(self.retained, bool) or not isinstance(self.retained, int) or self.retained < 2:
            raise SpecError(
                f"lookup reload: retained={self.retained!r} is invalid: keep at least 2 snapshots (the current one "
                "and the one running readers may still use)"
            )


def _probe_stream(data: Any) -> StreamSource | KafkaTopicSource:
    """A probe stream as given, or from its JSON: a Kafka topic's declaration says its kind, a file stream's does
    not."""
    if isinstance(data, KafkaTopicSource):
        return data
    if isinstance(data, dict) and "kind" in data:
        return KafkaTopicSource.from_dict(data, "lookup join")
    return StreamSource.from_dict(data)


def _reload_time(text: object) -> str:
    """``scheduled_for`` as an ISO-8601 instant: it goes into the table's pointer, where every reload sensor of the
    table counts the schedule from it, so a wrong value must fail here, not in those sensors."""
    try:
        instant = datetime.datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise SpecError(
            f"lookup reload: scheduled_for={text!r} is not an ISO-8601 date and time with its offset: pass the reload "
            "sensor's XCom as it is (its 'due'), or leave it out for a manual load"
        )
    return instant.isoformat()
