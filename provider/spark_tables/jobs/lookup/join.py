"""The ``lookup_join`` job: enrich a query's or a stream's rows with their lookup table's rows (FLIP-221).

NONE and PARTIAL look each probe row's key up from the executors' Python workers (``lookup_partition``), PARTIAL
through each worker's cache. FULL sends no per-key query: it joins the probe side with the current full-cache
snapshot, which a stream reads again at every micro-batch, so a published reload is picked up without a restart. As
Flink loads a full cache before its first lookup, a FULL join of a table that has no snapshot yet loads one first,
as a reload would (``load_snapshot``: the same retries, lock and atomic publication, counted in ``loadCount``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import uuid
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from spark_tables.core.durations import parse_duration, whole_milliseconds
from spark_tables.core.errors import JobError
from spark_tables.core.lookup.job import AVAILABLE_NOW, ERROR_IF_EXISTS, LookupJoinJob
from spark_tables.core.lookup.options import CacheMode
from spark_tables.core.lookup.result import LookupJoinResult
from spark_tables.core.lookup.snapshot import Pointer, Snapshot
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs import files
from spark_tables.jobs.cancellation import Cancellation
from spark_tables.jobs.connect_functions import carried
from spark_tables.jobs.failures import failures_named
from spark_tables.jobs.lookup.arrow_types import arrow_type
from spark_tables.jobs.lookup.metrics import aggregate
from spark_tables.jobs.lookup.partition import PartitionLookup
from spark_tables.jobs.lookup.reload import (
    lease_snapshot,
    load_snapshot,
    read_pointer,
    release_snapshot,
)
from spark_tables.jobs.lookup.source import source_for
from spark_tables.jobs.streaming.sources.kafka_topic import skipped_messages
from spark_tables.jobs.streaming.sources.streams import declared_source_rows

log = logging.getLogger(__name__)

#: The column the snapshot side carries through a FULL join to tell matched probe rows from unmatched ones.
_MATCHED = "__spark_tables_lookup_matched"


class LookupJoin:
    """One lookup table joined to probe sides of one shape: a batch's query, or each micro-batch of a stream."""

    def __init__(self, spark: SparkSession, job: LookupJoinJob, cancellation: Cancellation | None = None) -> None:
        self.spark, self.job = spark, job
        self.cancellation = cancellation or Cancellation()
        self.options = job.lookup.lookup_options
        self.key = job.lookup.source.key
        #: FULL: the pointer as last read (the same version may come back with more loads counted).
        self.pointer: Pointer | None = None
        #: FULL: whether this join loaded the table's first snapshot itself.
        self.loaded_snapshot = False
        #: FULL: the name of this join's leases on the snapshots it reads.
        self.reader = uuid.uuid4().hex
        self._snapshot_frame: DataFrame | None = None
        with failures_named(f"lookup table {job.lookup.name} ({job.lookup.source.table})"):
            if self.options.cache is CacheMode.FULL:
                self.value_fields = self._current_snapshot_frame()[1].schema.fields[len(self.key) :]
            else:
                source = source_for(job.lookup.source)
                self.value_fields = source.schema(spark).fields[len(self.key) :]
                source.close()
        self.value_names = tuple(field.name for field in self.value_fields)
        #: Observations of joins not yet added to ``_totals`` (a stream makes one a micro-batch).
        self._pending: list[Observation] = []
        self._totals = {"rows": 0, "hitCount": 0, "unmatchedCount": 0}

    @property
    def snapshot(self) -> Snapshot | None:
        """FULL: the snapshot joined last."""
        return self.pointer.current if self.pointer is not None else None

    def _current_snapshot_frame(self) -> tuple[Snapshot, DataFrame]:
        pointer = read_pointer(self.job.lookup.snapshots)
        if pointer.current is None:
            log.info("lookup table %s has no full-cache snapshot yet: loading one first", self.job.lookup.name)
            load = load_snapshot(self.spark, self.job.lookup, self.cancellation, only_if_missing=True)
            pointer, self.loaded_snapshot = load.pointer, load.loaded
        snapshot = pointer.current
        root = self.job.lookup.snapshots
        lease_snapshot(root, snapshot.version, self.reader)  # renewed at every read: retention leaves it alone
        if self.snapshot is None or snapshot.version != self.snapshot.version:
            held = f", {snapshot.table_version.describe()}" if snapshot.table_version else ""
            log.info(
                "lookup table %s: reading snapshot %s (%d rows%s)",
                self.job.lookup.name,
                snapshot.version,
                snapshot.rows,
                held,
            )
            if self.snapshot is not None:
                release_snapshot(root, self.snapshot.version, self.reader)
            self._snapshot_frame = self.spark.read.parquet(snapshot.location)
        self.pointer = pointer
        return snapshot, self._snapshot_frame

    def release(self) -> None:
        """FULL: release the lease on the snapshot this join read (the join is done with it)."""
        if self.snapshot is not None:
            release_snapshot(self.job.lookup.snapshots, self.snapshot.version, self.reader)

    def apply(self, probe: DataFrame) -> DataFrame:
        """The joined rows: the probe's columns, then the lookup table's value columns."""
        clash = sorted(set(probe.columns) & set(self.value_names))
        if clash:
            raise JobError(
                f"lookup join: column(s) {clash} are both in the probe side and in lookup table "
                f"{self.job.lookup.name}: rename them in the probe query or name the lookup table's columns"
            )
        missing = [column for column in self.job.on if column not in probe.columns]
        if missing:
            raise JobError(f"lookup join: on column(s) {missing} are not in the probe side's columns {probe.columns}")
        if self.options.shuffle:
            probe = probe.repartition(*self.job.on)
        observation = Observation(f"lookup_join_{self.job.lookup.name}")
        self._pending.append(observation)
        if self.options.cache is CacheMode.FULL:
            return self._join_snapshot(probe, observation)
        return self._join_per_key(probe).observe(observation, F.count(F.lit(1)).alias("rows"))

    def _join_snapshot(self, probe: DataFrame, observation: Observation) -> DataFrame:
        _, snapshot = self._current_snapshot_frame()
        keys = [f"__key{i}" for i in range(len(self.key))]
        dimension = snapshot.select(
            *(F.col(k).alias(alias) for k, alias in zip(self.key, keys, strict=True)),
            *self.value_names,
            F.lit(True).alias(_MATCHED),
        )
        # As in Flink's LookupFullCache, the full cache answers every lookup: a probe row with a key is a hit, with
        # the table's rows for it or none (counted apart as unmatched); a null key looks nothing up, as per key.
        keyed = functools.reduce(lambda a, b: a & b, [probe[column].isNotNull() for column in self.job.on])
        lookups = Observation(f"lookup_join_{self.job.lookup.name}_lookups")
        self._pending.append(lookups)
        probe = probe.observe(lookups, F.count(F.when(keyed, 1)).alias("hitCount"))
        condition = [probe[column] == dimension[alias] for column, alias in zip(self.job.on, keys, strict=True)]
        joined = probe.join(dimension, condition, "left").observe(
            observation,
            F.count(F.lit(1)).alias("rows"),
            F.count(F.when(F.col(_MATCHED).isNull() & keyed, 1)).alias("unmatchedCount"),
        )
        if self.job.join_type == "inner":
            joined = joined.where(F.col(_MATCHED).isNotNull())
        return joined.select(*(probe[column] for column in probe.columns), *self.value_names)

    def _join_per_key(self, probe: DataFrame) -> DataFrame:
        resolved = dataclasses.replace(self.job.lookup.source, columns=self.value_names)
        time_zone = self.spark.conf.get("spark.sql.session.timeZone")  # how Arrow batches carry TIMESTAMP columns
        definition = json.dumps([dataclasses.asdict(resolved), self.job.lookup.options], sort_keys=True, default=str)
        partition_lookup = PartitionLookup(
            lookup_id=f"{self.spark.conf.get('spark.app.id')}:{hashlib.sha256(definition.encode()).hexdigest()[:16]}",
            name=self.job.lookup.name,
            source=resolved,
            options=self.job.lookup.options,
            on=self.job.on,
            value_names=self.value_names,
            value_types=tuple(arrow_type(field.dataType, time_zone) for field in self.value_fields),
            inner=self.job.join_type == "inner",
            metrics_folder=self.job.metrics_uri,
        )
        fields = [StructField(f.name, f.dataType, True) for f in self.value_fields]
        return probe.mapInArrow(partition_lookup, StructType([*probe.schema.fields, *fields]))

    def metrics(self, workers: list[dict[str, Any]]) -> dict[str, Any]:
        """The FLIP's metrics: per key, the sums of ``workers`` (``worker_metrics``); FULL, the snapshot's."""
        self._settle()
        if self.options.cache is CacheMode.FULL:
            hits = self._totals["hitCount"]
            return {
                "hitCount": hits,
                "missCount": 0,
                "unmatchedCount": self._totals["unmatchedCount"],
                **self.pointer.metrics(),
                "hitRate": 1.0 if hits else 0.0,
            }
        return aggregate(workers)

    def worker_metrics(self) -> list[dict[str, Any]]:
        """Per key (NONE, PARTIAL): each executor Python worker's own metrics, in the order of their sums (most
        lookups first); a FULL join's come from the snapshot, and are not per worker."""
        if self.options.cache is CacheMode.FULL:
            return []
        workers = _worker_metrics(self.job.metrics_uri)
        return sorted(workers, key=lambda w: (-(w["hitCount"] + w["missCount"]), w["missCount"]))

    def rows(self) -> int:
        self._settle()
        return self._totals["rows"]

    def report(self, batches: int) -> dict[str, Any]:
        """What the join did over ``batches`` batches (0: none ran, the table's metrics as found): rows, the FLIP's
        metrics, and the snapshot it read (FULL)."""
        snapshot, workers = self.snapshot, self.worker_metrics()
        return {
            "batches": batches,
            "rows": self.rows(),
            "metrics": self.metrics(workers),
            "worker_metrics": workers,
            "snapshot": snapshot.version if snapshot is not None else None,
            "table_version": snapshot.table_version.to_dict() if snapshot and snapshot.table_version else None,
        }

    def _settle(self) -> None:
        """Add what the finished joins observed to the totals (``get`` waits for a join's action to end)."""
        for observation in self._pending:
            for name, value in observation.get.items():
                self._totals[name] += int(value)
        self._pending.clear()


def _worker_metrics(folder: str) -> list[dict[str, Any]]:
    """The metrics each worker left, one file a worker."""
    names = [name for name in files.list_names(folder) if name.endswith(".json")]
    return [json.loads(files.read_text(f"{folder.rstrip('/')}/{name}")) for name in names]


def run_lookup_join(spark: SparkSession, job: LookupJoinJob, cancellation: Cancellation) -> LookupJoinResult:
    lookup_join = LookupJoin(spark, job, cancellation)
    log.info(
        "lookup join with %s (lookup.cache=%s) on %s = %s",
        job.lookup.name,
        lookup_join.options.cache,
        list(job.on),
        list(job.lookup.source.key),
    )
    if job.probe is not None and job.output is not None and job.mode == ERROR_IF_EXISTS:
        _check_output_is_new(spark, job.output)
    try:
        if job.probe is not None:
            joined = lookup_join.apply(spark.sql(job.probe))
            if job.output is not None:
                joined.write.mode(job.mode).saveAsTable(job.output)
            else:
                joined.write.format("noop").mode("overwrite").save()
            done = lookup_join.report(1)
        else:
            done = _run_stream(spark, job, cancellation) or lookup_join.report(0)
    finally:
        lookup_join.release()
        files.remove(job.metrics_uri)
    return LookupJoinResult(
        lookup=job.lookup.name,
        cache=str(lookup_join.options.cache),
        rows=done["rows"],
        output=job.output,
        batches=done["batches"],
        metrics=done["metrics"],
        worker_metrics=done["worker_metrics"],
        snapshot=done["snapshot"],
        loaded_snapshot=lookup_join.loaded_snapshot if done["snapshot"] is not None else None,
        table_version=done.get("table_version"),
        malformed_skipped=done.get("malformed_skipped"),
    )


def _check_output_is_new(spark: SparkSession, output: str) -> None:
    """A batch join writes a table of its own unless told to add to or replace one already there."""
    if spark.catalog.tableExists(output):
        raise JobError(
            f"output table {output} exists, and the join replaces or adds to a table only when told: give "
            "mode='overwrite' to replace it, or mode='append' to add to it"
        )


class StreamEnricher:
    """foreachBatch's function of a lookup join of a stream: enriches each micro-batch and appends it to the output.

    It runs in the driver, or in session mode in the Spark Connect server's Python (``connect_functions``), so it makes
    its ``LookupJoin`` on its first batch's session and tells the job what it did so far through a file in the
    job's metrics folder (``stream_report``), written after each batch.
    """

    def __init__(self, job: LookupJoinJob) -> None:
        self.job = job
        self.lookup_join: LookupJoin | None = None
        self.batches = 0

    def __getstate__(self) -> dict[str, Any]:
        return {"job": self.job, "lookup_join": None, "batches": 0}

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.lookup_join is None:
            self.lookup_join = LookupJoin(batch.sparkSession, self.job)
        self.lookup_join.apply(batch).write.mode("append").saveAsTable(self.job.output)
        self.batches += 1
        done = self.lookup_join.report(self.batches)
        files.write_bytes(stream_report(self.job), json.dumps(done).encode())
        log.info("micro-batch %d enriched: %s", batch_id, json.dumps(done["metrics"]))


def stream_report(job: LookupJoinJob) -> str:
    """Where a stream's ``StreamEnricher`` leaves what it did (in a folder of its own: the metrics folder's own
    files are the workers')."""
    return f"{job.metrics_uri.rstrip('/')}/stream/report.json"


def _run_stream(spark: SparkSession, job: LookupJoinJob, cancellation: Cancellation) -> dict[str, Any] | None:
    """Enrich each micro-batch and append it to the output; returns what the batches did, None if none ran."""
    stream = _probe_frame(spark, job)
    enrich = carried(spark, StreamEnricher(job))
    writer = stream.writeStream.foreachBatch(enrich).option("checkpointLocation", job.checkpoint)
    if job.trigger == AVAILABLE_NOW:
        writer = writer.trigger(availableNow=True)
    else:
        interval_ms = whole_milliseconds(parse_duration(job.trigger, "trigger"))  # Spark counts milliseconds
        writer = writer.trigger(processingTime=f"{interval_ms} milliseconds")
    query = writer.start()
    progress: dict[int, Any] = {}  # by batch, gathered as it runs: Spark keeps only its latest updates

    def gather() -> None:
        progress.update((p["batchId"], p) for p in query.recentProgress if p.get("batchId") is not None)

    try:
        while not query.awaitTermination(0.5):
            cancellation.check()
            gather()
    finally:
        if query.isActive:
            query.stop()
    gather()
    report = stream_report(job)
    done = json.loads(files.read_text(report)) if files.exists(report) else None
    skipped = skipped_messages(list(progress.values()))
    return {**done, "malformed_skipped": skipped} if done is not None and skipped else done


def _probe_frame(spark: SparkSession, job: LookupJoinJob) -> DataFrame:
    """The probe stream: a Kafka topic's messages as the declared columns, or Spark's streaming reader's rows."""
    source = job.probe_stream
    if isinstance(source, KafkaTopicSource):
        return declared_source_rows(spark, source, job.kafka_connections)
    reader = spark.readStream.format(source.format).options(**source.options)
    if source.schema:
        reader = reader.schema(source.schema)
    return reader.load(source.path) if source.path else reader.load()
