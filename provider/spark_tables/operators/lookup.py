"""Lookup joins and full-cache reloads of lookup tables (FLIP-221), as Spark jobs of Airflow tasks."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from airflow.providers.common.compat.sdk import Stats
from airflow.sdk import Context

from spark_tables.core.durable_job import DriverLaunch
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import metrics_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.core.jvm_jars import KAFKA_CONNECTOR_JARS
from spark_tables.core.lookup.job import AVAILABLE_NOW, ERROR_IF_EXISTS, LookupJoinJob, LookupReloadJob
from spark_tables.core.lookup.options import CacheMode
from spark_tables.core.lookup.result import LookupJoinResult, LookupReloadResult
from spark_tables.core.lookup.table import CATALOG, LookupTable
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.hooks.kafka import kafka_topics
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.operators.spark_job import SparkJobOperator
from spark_tables.tasks.sql_reader import nestable_query
from spark_tables.utils import settings

#: The FLIP's counters (added to Airflow's counters of the same name) and gauges (set), plus our hit rate.
COUNTERS = ("hitCount", "missCount", "loadCount", "numLoadFailure", "unmatchedCount")
GAUGES = ("latestLoadTime", "numCachedRecords", "numCachedBytes", "hitRate")


class _LookupOperator(SparkJobOperator):
    """What lookup joins and reloads share: a lookup table, options over its own, its JDBC driver, its metrics."""

    def __init__(self, *, lookup: LookupTable, lookup_options: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(lookup, LookupTable):
            raise TypeError(f"lookup must be a LookupTable declaration, not {type(lookup).__name__}")
        self.lookup = lookup
        self.lookup_options = dict(lookup_options or {})

    @functools.cached_property
    def lookup_hook(self) -> LookupTableHook:
        """The table's hook with the task's rendered options, made once in ``execute``: one read of its connection."""
        return LookupTableHook(self.lookup.with_options(self.lookup_options))

    def job_jars(self, job: Any) -> list[str]:
        jar = self.lookup_hook.jdbc_driver_jar()
        return [jar] if jar else []

    def check_catalog(self) -> None:
        """A catalog table is read by the task's own Spark application: the catalog the task runs on must be it."""
        if self.lookup.source == CATALOG and self.lookup.conn_id != self.catalog_conn_id:
            raise SpecError(
                f"lookup table {self.lookup.name} is a table of catalog {self.lookup.conn_id!r}, and this task runs on "
                f"catalog {self.catalog_conn_id!r}: give the task catalog_conn_id={self.lookup.conn_id!r}"
            )

    def xcom_value(self, result: JobResult) -> dict[str, Any]:
        """The job's output and the table's definition (``lookup_definition``), with the FLIP's metrics logged."""
        if isinstance(result.output, LookupJoinResult | LookupReloadResult) and result.output.metrics:
            self.report_metrics(result.output.metrics)
        return {**super().xcom_value(result), "lookup_definition": self.lookup.definition()}

    def report_metrics(self, metrics: Mapping[str, Any]) -> None:
        """Log the FLIP's metrics and emit them as Airflow metrics ``spark_tables.lookup.<table>.<metric>``."""
        self.log.info("lookup table %s metrics: %s", self.lookup.name, json.dumps(metrics))
        tags = {"dag_id": self.dag_id, "task_id": self.task_id, "lookup": self.lookup.name}
        for name in COUNTERS:
            if metrics.get(name):
                Stats.incr(f"spark_tables.lookup.{self.lookup.name}.{name}", int(metrics[name]), tags=tags)
        for name in GAUGES:
            if name in metrics:
                Stats.gauge(f"spark_tables.lookup.{self.lookup.name}.{name}", metrics[name], tags=tags)


class SparkLookupJoinOperator(_LookupOperator):
    """Enrich each row of ``probe`` (a query) or ``probe_stream`` with the rows ``lookup`` holds for its key.

    The table's ``lookup.cache`` option decides how: NONE, a query per probe row; PARTIAL, through an LRU/expiring
    cache in each executor worker; FULL, a join with the table's current full-cache snapshot, with no per-key query
    (a table without one yet is loaded first, as a reload would). XCom gets ``rows``, ``cache``, ``snapshot`` and
    ``loaded_snapshot`` (FULL) and the FLIP's ``metrics`` added up over every executor, also logged and emitted as
    Airflow metrics.

    :param lookup: the ``LookupTable``.
    :param on: the probe side's columns matched, in order, to the lookup table's key columns.
    :param probe: the query whose rows are enriched. (templated)
    :param probe_stream: or a streaming source enriched micro-batch by micro-batch into ``output_table``: Spark's
        streaming reader, ``{"format", "path", "options", "schema"}``, or a Kafka topic, a ``KafkaTopicSource`` (its
        topic found on its brokers before the job; its offsets kept in the checkpoint; with ``on_malformed="skip"``
        XCom's ``malformed_skipped`` counts what it left out); a FULL lookup picks up each newly published snapshot
        without a restart.
    :param join_type: ``left`` (probe rows without a match kept, with nulls) or ``inner``.
    :param output_table: the table written; none: the join runs for its metrics only. (templated)
    :param mode: how a batch's output meets a table already there: ``error`` (the default: the task fails, naming
        the other two), ``overwrite`` or ``append`` (a stream appends).
    :param checkpoint: the stream's checkpoint folder URI. (templated)
    :param trigger: ``available-now`` (drain the stream's input and stop) or a micro-batch interval (``10 s``).
    :param lookup_options: ``lookup.*`` options over the table's own (``{"lookup.cache": "FULL"}``). (templated)
    """

    template_fields: Sequence[str] = (
        *SparkJobOperator.template_fields,
        "probe",
        "probe_stream",
        "output_table",
        "checkpoint",
        "lookup_options",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SparkJobOperator.template_fields_renderers,
        "probe": "sql",
        "lookup_options": "json",
    }
    ui_color = "#e3f4ea"

    def __init__(
        self,
        *,
        on: str | Sequence[str],
        probe: str | None = None,
        probe_stream: Mapping[str, Any] | KafkaTopicSource | None = None,
        join_type: str = "left",
        output_table: str | None = None,
        mode: str = ERROR_IF_EXISTS,
        checkpoint: str | None = None,
        trigger: str = AVAILABLE_NOW,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.on = (on,) if isinstance(on, str) else tuple(on)
        self.probe = probe
        self.probe_stream = dict(probe_stream) if isinstance(probe_stream, Mapping) else probe_stream
        self.join_type = join_type
        self.output_table = output_table
        self.mode = mode
        self.checkpoint = checkpoint
        self.trigger = trigger

    def shared_folders(self, job: Any, caches: tuple[CacheUse, ...]) -> dict[str, str]:
        """Besides cached tables': the exchange, where each executor worker leaves its cache metrics; the lookup
        root, whose snapshot a FULL join reads; a streaming probe's checkpoint."""
        folders = {**super().shared_folders(job, caches), "[spark_tables] exchange_uri": settings.exchange_uri()}
        if job.lookup.lookup_options.cache is CacheMode.FULL:
            folders["[spark_tables] lookup_uri"] = settings.lookup_uri()
        if job.checkpoint:
            folders["checkpoint"] = job.checkpoint
        return folders

    def connector_jars(self, job: Any) -> list[str]:
        """Spark's Kafka connector, for a Kafka probe."""
        return list(KAFKA_CONNECTOR_JARS) if isinstance(self.probe_stream, KafkaTopicSource) else []

    def build_job(self, context: Context) -> LookupJoinJob:
        self.check_catalog()
        kafka = kafka_topics([self.probe_stream]).connections if isinstance(self.probe_stream, KafkaTopicSource) else {}
        return LookupJoinJob(
            lookup=self.lookup_hook.spec(),
            on=self.on,
            metrics_uri=metrics_uri(self.result_uri(context)),
            probe=nestable_query(self.probe, "lookup join: probe") if self.probe is not None else None,
            probe_stream=self.probe_stream,
            join_type=self.join_type,
            output=self.output_table,
            mode=self.mode,
            checkpoint=self.checkpoint,
            trigger=self.trigger,
            kafka_connections=kafka,
        )


class SparkLookupReloadOperator(_LookupOperator):
    """Scan a FULL lookup table whole into a new snapshot, with Spark's JDBC reader in parallel, and publish it.

    Running lookup joins are not blocked and keep reading the snapshot they started with; the next ones (and the
    next micro-batch of a stream) read the new one. A failed reload, after ``lookup.max-retries`` retries with
    backoff, keeps the old snapshot in use, records the failure in the pointer (the sensor backs off from it) and
    fails the task. Loads of one table hold its lock, so concurrent ones publish once. Schedule it behind a
    ``LookupReloadSensor``; XCom gets ``snapshot``, ``loads``, ``load_failures``, ``loaded``, ``attempts``,
    ``dropped`` (old snapshots deleted) and ``metrics``.

    :param scheduled_for: the reload time this load is for, as the sensor returns it to XCom; the schedule counts
        the next TIMED reload from it. (templated)
    :param num_partitions: parallel reads of the table; default the application's parallelism.
    :param retained: snapshots kept, the current one included (at least 2).
    """

    template_fields: Sequence[str] = (*SparkJobOperator.template_fields, "scheduled_for", "lookup_options")
    ui_color = "#d4efdf"

    def __init__(
        self,
        *,
        scheduled_for: str | None = None,
        num_partitions: int | None = None,
        retained: int = 2,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scheduled_for = scheduled_for
        self.num_partitions = num_partitions
        self.retained = retained

    def build_job(self, context: Context) -> LookupReloadJob:
        self.check_catalog()
        return LookupReloadJob(
            lookup=self.lookup_hook.spec(),
            scheduled_for=self.scheduled_for or None,
            num_partitions=self.num_partitions,
            retained=self.retained,
        )

    def shared_folders(self, job: Any, caches: tuple[CacheUse, ...]) -> dict[str, str]:
        """Besides cached tables': the lookup root, where the executors write the new snapshot."""
        return {**super().shared_folders(job, caches), "[spark_tables] lookup_uri": settings.lookup_uri()}

    def result_without_job(self, job: LookupReloadJob) -> JobResult | None:
        """A table with versions whose version is the one its snapshot holds has nothing to load: read from its log
        here, without a Spark job (the job's own load checks the same under the table's lock)."""
        pointer = self.lookup_hook.pointer()
        snapshot = pointer.current
        if snapshot is None or snapshot.table_version is None:
            return None
        now = self.lookup_hook.version_now(snapshot)
        if now != snapshot.table_version:
            self.log.info(
                "lookup table %s: the table is at %s, its snapshot %s holds version %d: loading",
                self.lookup.name,
                now.describe() if now is not None else "no version (gone)",
                snapshot.version,
                snapshot.table_version.number,
            )
            return None
        self.log.info(
            "lookup table %s: %s is the one snapshot %s holds: nothing to load, no Spark job",
            self.lookup.name,
            now.describe(),
            snapshot.version,
        )
        output = LookupReloadResult.of(self.lookup.name, pointer, loaded=False, unchanged=True)
        return JobResult(kind=LookupReloadJob.kind, output=output)

    def run_hook(self, hook: Any, launch: DriverLaunch | None = None) -> JobResult:
        try:
            return super().run_hook(hook, launch)
        except BaseException:
            result = hook.last_result
            if result is not None and isinstance(result.output, LookupReloadResult) and result.output.metrics:
                self.report_metrics(result.output.metrics)  # the failed load counts too
            raise
