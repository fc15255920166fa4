"""Lookup joins and full-cache reloads on the shared local session, against a real PostgreSQL dimension table."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.types import TimestampNTZType

from spark_tables.core.errors import JobError
from spark_tables.core.kafka import spark_options
from spark_tables.core.lookup.job import LookupJoinJob, LookupReloadJob, StreamSource
from spark_tables.core.lookup.result import LookupJoinResult, LookupReloadResult
from spark_tables.core.lookup.table import LookupSpec, SourceTable
from spark_tables.core.streaming.sources import KafkaTopicSource
from spark_tables.jobs.cancellation import Cancellation, JobCancelled
from spark_tables.jobs.lookup.join import LookupJoin, run_lookup_join
from spark_tables.jobs.lookup.postgres import PostgresLookupSource
from spark_tables.jobs.lookup.reload import LoadFailed, load_snapshot, read_pointer, run_lookup_reload, versions
from tests.kafka import broker, new_topic, send
from tests.spark.postgres import PG

pytestmark = pytest.mark.spark

SCHEMA = "lookup_spark_tests"
#: Keys 1..40, each with a name and an amount; key 7 has two rows (a lookup returns both).
DIMENSION = [(k, f"customer-{k}", Decimal(k) / 4) for k in range(1, 41)] + [(7, "customer-7-bis", Decimal("0.50"))]
#: Probe keys: repeats (hits), keys the table lacks (41, 99), and a null key.
PROBE_KEYS = [1, 2, 1, 3, 7, 41, 1, 2, None, 99, 40, 7, 3]
HOURLY = {"lookup.full-cache.periodic-reload.interval": "1 h"}


def _execute(*statements: str) -> None:
    with psycopg.connect(
        host=PG["host"], port=PG["port"], dbname=PG["dbname"], user=PG["user"], autocommit=True
    ) as connection:
        for statement in statements:
            connection.execute(statement)


@pytest.fixture(scope="module")
def dimension() -> Iterator[str]:
    with dimension_table(SCHEMA) as table:
        yield table


@contextlib.contextmanager
def dimension_table(schema: str) -> Iterator[str]:
    """The ``DIMENSION`` rows in table ``<schema>.customers`` of the tests' PostgreSQL database, meanwhile."""
    _execute(
        f"DROP SCHEMA IF EXISTS {schema} CASCADE",
        f"CREATE SCHEMA {schema}",
        f"CREATE TABLE {schema}.customers (id integer NOT NULL, name text, amount numeric(10, 2))",
        f"CREATE INDEX ON {schema}.customers (id)",
    )
    try:
        with (
            psycopg.connect(host=PG["host"], port=PG["port"], dbname=PG["dbname"], user=PG["user"]) as connection,
            connection.cursor() as cursor,
        ):
            cursor.executemany(f"INSERT INTO {schema}.customers VALUES (%s, %s, %s)", DIMENSION)
        yield f"{schema}.customers"
    finally:
        _execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _spec(table: str, tmp_path: Path, cache: str, **options: str) -> LookupSpec:
    source = SourceTable(kind="postgres", connection=dict(PG), table=table, key=("id",))
    cache_options = {"lookup.partial-cache.max-rows": "100"} if cache == "PARTIAL" else {}
    return LookupSpec(
        name="customers",
        source=source,
        options={"lookup.cache": cache, **cache_options, **options},
        snapshots=(tmp_path / "lookup" / "customers").as_uri(),
    )


def _join_job(spec: LookupSpec, tmp_path: Path, **fields: object) -> LookupJoinJob:
    values = {
        "lookup": spec,
        "on": ("customer_id",),
        "metrics_uri": (tmp_path / f"metrics-{spec.lookup_options.cache}").as_uri(),
        "probe": "SELECT * FROM probe",
        **fields,
    }
    return LookupJoinJob(**values)


@pytest.fixture
def probe(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(i, key) for i, key in enumerate(PROBE_KEYS)], "row INT, customer_id INT")
    frame.repartition(2).createOrReplaceTempView("probe")


def _reload(spark: SparkSession, spec: LookupSpec, **fields: object) -> LookupReloadResult:
    return run_lookup_reload(spark, LookupReloadJob(lookup=spec, **fields), Cancellation())


def _expected(join_type: str) -> list[tuple]:
    rows = {key: [(name, amount) for k, name, amount in DIMENSION if k == key] for key in set(PROBE_KEYS)}
    expected = []
    for index, key in enumerate(PROBE_KEYS):
        matches = rows.get(key) or ([] if join_type == "inner" else [(None, None)])
        expected += [(index, key, name, amount) for name, amount in matches]
    return sorted(expected, key=repr)


@pytest.mark.parametrize("join_type", ["left", "inner"])
def test_none_partial_and_full_give_the_same_rows(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path, join_type: str
) -> None:
    results = {}
    _reload(spark, _spec(dimension, tmp_path, "FULL", **{"lookup.full-cache.periodic-reload.interval": "1 h"}))
    for cache in ("NONE", "PARTIAL", "FULL"):
        options = {"lookup.full-cache.periodic-reload.interval": "1 h"} if cache == "FULL" else {}
        job = _join_job(_spec(dimension, tmp_path, cache, **options), tmp_path, join_type=join_type)
        output = f"joined_{cache.lower()}_{join_type}"
        run_lookup_join(spark, dataclasses.replace(job, output=output), Cancellation())
        results[cache] = sorted((tuple(row) for row in spark.table(output).collect()), key=repr)

    assert results["NONE"] == results["PARTIAL"] == results["FULL"] == _expected(join_type)


def test_a_batch_join_never_replaces_a_table_already_there_unless_told(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    """The default mode, error: someone's table of the output's name fails the job in one line, before any lookup,
    and stays as it was; overwrite replaces it."""
    spark.sql("CREATE TABLE theirs USING parquet AS SELECT 'not the join''s' AS note")
    job = dataclasses.replace(_join_job(_spec(dimension, tmp_path, "NONE"), tmp_path), output="theirs")
    assert job.mode == "error"

    with pytest.raises(JobError) as caught:
        run_lookup_join(spark, job, Cancellation())

    assert str(caught.value) == (
        "output table theirs exists, and the join replaces or adds to a table only when told: give "
        "mode='overwrite' to replace it, or mode='append' to add to it"
    )
    assert [tuple(row) for row in spark.table("theirs").collect()] == [("not the join's",)]
    run_lookup_join(spark, dataclasses.replace(job, mode="overwrite"), Cancellation())
    assert spark.table("theirs").columns != ["note"]


@pytest.mark.parametrize("cache", ["NONE", "PARTIAL"])
def test_async_lookups_give_the_same_rows_and_count_as_sync_ones(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path, cache: str
) -> None:
    spec = _spec(dimension, tmp_path, cache, **{"lookup.async": "true", "lookup.async.capacity": "3"})
    output = run_lookup_join(spark, _join_job(spec, tmp_path, output=f"joined_async_{cache.lower()}"), Cancellation())

    assert sorted((tuple(row) for row in spark.table(f"joined_async_{cache.lower()}").collect()), key=repr) == (
        _expected("left")
    )
    metrics, looked_up = output.metrics, len([key for key in PROBE_KEYS if key is not None])
    if cache == "NONE":
        assert metrics["loadCount"] == looked_up and metrics["missCount"] == 0
    else:
        assert metrics["loadCount"] == metrics["missCount"] and metrics["hitCount"] + metrics["missCount"] == looked_up


def test_partial_cache_metrics_are_added_up_over_the_workers(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    # Options of its own: a cache of its own, cold (a worker's cache outlives a job of its application).
    spec = _spec(dimension, tmp_path, "PARTIAL", **{"lookup.partial-cache.max-rows": "50"})
    output = run_lookup_join(spark, _join_job(spec, tmp_path), Cancellation())

    metrics = output.metrics
    looked_up = len([key for key in PROBE_KEYS if key is not None])
    assert metrics["hitCount"] + metrics["missCount"] == looked_up
    assert metrics["loadCount"] == metrics["missCount"]
    assert len(set(PROBE_KEYS) - {None}) <= metrics["missCount"] < looked_up  # each worker loads a key once
    assert metrics["numCachedRecords"] > 0 and metrics["numCachedBytes"] > 0
    assert metrics["hitRate"] == pytest.approx(metrics["hitCount"] / looked_up)
    assert output.rows == len(_expected("left"))
    # each worker's own figures, which the sums are of (most lookups first)
    workers = output.worker_metrics
    assert workers and all(worker["loadCount"] == worker["missCount"] for worker in workers)
    for name in ("hitCount", "missCount", "numCachedRecords", "numCachedBytes"):
        assert sum(worker[name] for worker in workers) == metrics[name], name
    lookups = [worker["hitCount"] + worker["missCount"] for worker in workers]
    assert lookups == sorted(lookups, reverse=True)


def test_none_sends_a_query_per_probe_row(spark: SparkSession, dimension: str, probe: None, tmp_path: Path) -> None:
    output = run_lookup_join(spark, _join_job(_spec(dimension, tmp_path, "NONE"), tmp_path), Cancellation())

    assert output.metrics["loadCount"] == len([key for key in PROBE_KEYS if key is not None])
    assert output.metrics["hitCount"] == output.metrics["missCount"] == 0


def test_retention_leaves_the_snapshot_a_running_join_reads(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    """Two reloads publish while a FULL join reads the first snapshot: with two versions retained, the first would
    go under the join; its lease keeps it until the join releases it, and the next publish drops it."""
    spec = _spec(dimension, tmp_path, "FULL", **{"lookup.full-cache.periodic-reload.interval": "1 h"})
    first = _reload(spark, spec).snapshot["version"]
    join = LookupJoin(spark, _join_job(spec, tmp_path))  # reads the pointer: the first snapshot, leased
    joined = join.apply(spark.table("probe"))

    second, third = (_reload(spark, spec).snapshot["version"] for _ in range(2))

    assert versions(spec.snapshots) == [first, second, third]
    assert sorted(map(tuple, joined.collect()), key=repr) == _expected("left"), "the join reads its snapshot whole"
    join.release()
    fourth = _reload(spark, spec)
    assert versions(spec.snapshots) == [third, fourth.snapshot["version"]]
    assert first in fourth.dropped


def test_full_reads_the_snapshot_and_sends_no_per_key_query(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    spec = _spec(dimension, tmp_path, "FULL", **{"lookup.full-cache.periodic-reload.interval": "1 h"})
    reload = _reload(spark, spec, num_partitions=2)
    _execute(f"UPDATE {dimension} SET name = 'changed after the snapshot'")
    try:
        output = run_lookup_join(
            spark, dataclasses.replace(_join_job(spec, tmp_path), output="joined_full"), Cancellation()
        )
        names = {row.name for row in spark.table("joined_full").collect()}
    finally:
        _execute(f"UPDATE {dimension} SET name = 'customer-' || id WHERE name = 'changed after the snapshot'")
        _execute(f"UPDATE {dimension} SET name = 'customer-7-bis' WHERE id = 7 AND amount = 0.50")

    assert "changed after the snapshot" not in names  # read from the snapshot, not the database
    assert output.snapshot == reload.snapshot["version"]
    metrics = output.metrics
    assert metrics["numCachedRecords"] == len(DIMENSION) == reload.snapshot["rows"]
    assert metrics["numCachedBytes"] == reload.snapshot["bytes"] > 0
    assert metrics["loadCount"] == 1 and metrics["numLoadFailure"] == 0
    # LookupFullCacheTest: the full cache answers every key, so a key the snapshot lacks is a hit with no rows
    looked_up = [key for key in PROBE_KEYS if key is not None]
    assert metrics["hitCount"] == len(looked_up) and metrics["missCount"] == 0 and metrics["hitRate"] == 1.0
    assert metrics["unmatchedCount"] == len([key for key in looked_up if key not in {k for k, _, _ in DIMENSION}])


def test_a_failing_reload_keeps_the_old_snapshot_and_counts_a_failure(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    spec = _spec(dimension, tmp_path, "FULL", **{"lookup.full-cache.periodic-reload.interval": "1 h"})
    first = _reload(spark, spec).snapshot
    broken_source = dataclasses.replace(spec.source, table=f"{SCHEMA}.no_such_table")
    broken = dataclasses.replace(spec, source=broken_source, options={**spec.options, "lookup.max-retries": "1"})

    with pytest.raises(JobError, match=rf"failed after 2 attempt\(s\).*snapshot {first['version']} stays in use"):
        _reload(spark, broken)

    pointer = read_pointer(spec.snapshots)
    assert pointer.current.version == first["version"] and pointer.load_failures == 1
    assert versions(spec.snapshots) == [first["version"]]  # the failed attempt left nothing
    output = run_lookup_join(spark, _join_job(spec, tmp_path), Cancellation())
    assert output.snapshot == first["version"] and output.metrics["numLoadFailure"] == 1


def test_failed_reloads_in_a_row_are_recorded_in_the_pointer_until_one_publishes(
    spark: SparkSession, dimension: str, tmp_path: Path
) -> None:
    spec = _spec(dimension, tmp_path, "FULL", **HOURLY, **{"lookup.max-retries": "0"})
    broken = dataclasses.replace(spec, source=dataclasses.replace(spec.source, table=f"{SCHEMA}.no_such_table"))

    for count in (1, 2):
        with pytest.raises(LoadFailed, match=rf"\({count} failed load\(s\) in a row\).*no snapshot yet") as failed:
            _reload(spark, broken, scheduled_for="2026-11-22T10:00:00+00:00")
        pointer = read_pointer(spec.snapshots)
        assert pointer.current is None and pointer.loads == 0 and pointer.load_failures == count
        assert pointer.failing.count == count and "no_such_table" in pointer.failing.error
        assert pointer.failing.scheduled_for == "2026-11-22T10:00:00+00:00"
        assert pointer.failing.started <= pointer.failing.finished
        assert failed.value.output.metrics["numLoadFailure"] == count  # what the task reports

    published = _reload(spark, spec)

    pointer = read_pointer(spec.snapshots)
    assert pointer.failing is None and pointer.loads == 1 and pointer.load_failures == 2
    assert pointer.current.version == published.snapshot["version"]


def test_reloads_publish_new_versions_and_drop_the_oldest(spark: SparkSession, dimension: str, tmp_path: Path) -> None:
    spec = _spec(dimension, tmp_path, "FULL", **{"lookup.full-cache.periodic-reload.interval": "1 h"})
    made = [_reload(spark, spec, scheduled_for=f"2026-11-22T0{i}:00:00+00:00").snapshot for i in range(3)]

    assert versions(spec.snapshots) == [made[1]["version"], made[2]["version"]]
    pointer = read_pointer(spec.snapshots)
    assert pointer.current.version == made[2]["version"] and pointer.loads == 3
    assert pointer.current.scheduled_for == "2026-11-22T02:00:00+00:00"


def test_a_full_join_before_any_reload_loads_the_snapshot_itself(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    spec = _spec(dimension, tmp_path, "FULL", **HOURLY)
    first = run_lookup_join(
        spark, dataclasses.replace(_join_job(spec, tmp_path), output="joined_first"), Cancellation()
    )

    assert sorted((tuple(row) for row in spark.table("joined_first").collect()), key=repr) == _expected("left")
    pointer = read_pointer(spec.snapshots)
    assert versions(spec.snapshots) == [pointer.current.version] == [first.snapshot]
    assert first.loaded_snapshot is True and first.metrics["loadCount"] == 1
    assert first.metrics["latestLoadTime"] == pointer.current.load_milliseconds >= 0
    second = run_lookup_join(spark, _join_job(spec, tmp_path), Cancellation())
    assert second.loaded_snapshot is False and second.snapshot == first.snapshot
    assert second.metrics["loadCount"] == 1 and versions(spec.snapshots) == [first.snapshot]


def test_a_first_load_and_a_reload_waiting_on_the_same_lock_publish_once(
    spark: SparkSession, dimension: str, tmp_path: Path
) -> None:
    """A FULL join's first load and a reload started together: whichever takes the table's lock first loads and
    publishes; the other, having waited, finds that snapshot and uses it."""
    spec = _spec(dimension, tmp_path, "FULL", **HOURLY)
    waiting = _Waiting(expected=2)
    loads: dict[str, object] = {}

    def first_load() -> None:
        loads["join"] = load_snapshot(spark, spec, Cancellation(), only_if_missing=True)

    def reload() -> None:
        loads["reload"] = load_snapshot(spark, spec, Cancellation())

    with _holding_the_load_lock(spec), waiting.watching():
        threads = [threading.Thread(target=first_load), threading.Thread(target=reload)]
        for thread in threads:
            thread.start()
        assert waiting.all.wait(60), "both loads wait for the lock the test holds"
    for thread in threads:
        thread.join(120)

    assert sorted(load.loaded for load in loads.values()) == [False, True]  # one loaded, the other used it
    pointer = read_pointer(spec.snapshots)
    assert versions(spec.snapshots) == [pointer.current.version] and pointer.loads == 1
    assert {load.pointer.current for load in loads.values()} == {pointer.current}


class _Waiting(logging.Handler):
    """Sets ``all`` once ``expected`` loads have said that they wait for the table's lock."""

    def __init__(self, expected: int) -> None:
        super().__init__(logging.INFO)
        self.expected, self.seen, self.all = expected, 0, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "waiting for another load" in record.getMessage():
            self.seen += 1
            if self.seen == self.expected:
                self.all.set()

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        logger = logging.getLogger("spark_tables.jobs.lookup.reload")
        level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(self)
        try:
            yield
        finally:
            logger.removeHandler(self)
            logger.setLevel(level)


@contextlib.contextmanager
def _holding_the_load_lock(spec: LookupSpec) -> Iterator[None]:
    """The table's load lock, held from another PostgreSQL session, as a load running elsewhere would hold it."""
    with psycopg.connect(
        host=PG["host"], port=PG["port"], dbname=PG["dbname"], user=PG["user"], autocommit=True
    ) as connection:
        resource = f"spark_tables.lookup:{spec.snapshots}"
        assert connection.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (resource,)).fetchone()[0]
        yield


def test_a_running_stream_picks_up_a_new_snapshot_without_restarting(
    spark: SparkSession, dimension: str, tmp_path: Path
) -> None:
    spec = _spec(dimension, tmp_path, "FULL", **{"lookup.full-cache.periodic-reload.interval": "1 h"})
    _reload(spark, spec)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    job = LookupJoinJob(
        lookup=spec,
        on=("customer_id",),
        metrics_uri=(tmp_path / "metrics-stream").as_uri(),
        probe_stream=StreamSource(format="json", path=str(incoming), schema="batch INT, customer_id INT"),
        output="enriched_stream",
        checkpoint=(tmp_path / "checkpoint").as_uri(),
        trigger="100 ms",
    )
    cancellation = Cancellation()
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["output"] = run_lookup_join(spark, job, cancellation)
        except JobCancelled as err:
            outcome["cancelled"] = err

    (incoming / "1.json").write_text('{"batch": 1, "customer_id": 5}\n')
    started = _QueryStarted()
    spark.streams.addListener(started)
    runner = threading.Thread(target=run)
    runner.start()
    try:
        assert started.event.wait(120), "the lookup join started no stream"
    finally:
        spark.streams.removeListener(started)
    (query,) = spark.streams.active
    query.processAllAvailable()
    _execute(f"UPDATE {dimension} SET name = 'renamed' WHERE id = 5")
    try:
        _reload(spark, spec)
    finally:
        _execute(f"UPDATE {dimension} SET name = 'customer-5' WHERE id = 5")
    (incoming / "2.json").write_text('{"batch": 2, "customer_id": 5}\n')
    query.processAllAvailable()
    cancellation.request("the test is done")
    runner.join(timeout=120)

    names = {row.batch: row.name for row in spark.table("enriched_stream").collect()}
    assert names == {1: "customer-5", 2: "renamed"}
    assert "cancelled" in outcome


def enrich_a_stream(spark: SparkSession, spec: LookupSpec, tmp_path: Path, output: str) -> LookupJoinResult:
    """Run a lookup join of a stream available-now over the probe keys, written as two files read one a micro-batch
    (``PROBE_KEYS``, its first 6 rows in one, the rest in the other); check the output's rows and return the result.
    ``spark`` may be a driver's session or a Spark Connect client's."""
    incoming = tmp_path / f"incoming-{output}"
    incoming.mkdir()
    for name, part in (("1", range(6)), ("2", range(6, len(PROBE_KEYS)))):
        lines = [json.dumps({"row": index, "customer_id": PROBE_KEYS[index]}) for index in part]
        (incoming / f"{name}.json").write_text("\n".join(lines) + "\n")
    source = StreamSource(
        format="json", path=str(incoming), schema="row INT, customer_id INT", options={"maxFilesPerTrigger": "1"}
    )
    job = _join_job(
        spec,
        tmp_path,
        probe=None,
        probe_stream=source,
        output=output,
        checkpoint=(tmp_path / f"checkpoint-{output}").as_uri(),
    )
    result = run_lookup_join(spark, job, Cancellation())
    assert sorted((tuple(row) for row in spark.table(output).collect()), key=repr) == _expected("left")
    assert (result.batches, result.rows) == (2, len(_expected("left")))
    return result


def test_a_stream_is_enriched_a_micro_batch_at_a_time_and_its_counts_reach_the_result(
    spark: SparkSession, dimension: str, tmp_path: Path
) -> None:
    """What the stream's foreachBatch function did (in the driver here, in the Spark Connect server's Python in
    session mode: ``test_session_mode.py``) reaches the job's result through the file it leaves."""
    full_spec = _spec(dimension, tmp_path, "FULL", **HOURLY)
    full = enrich_a_stream(spark, full_spec, tmp_path, "enriched_full")
    none = enrich_a_stream(spark, _spec(dimension, tmp_path, "NONE"), tmp_path, "enriched_none")

    check_stream_metrics(full, none, full_spec)


def check_stream_metrics(full: LookupJoinResult, none: LookupJoinResult, full_spec: LookupSpec) -> None:
    """The metrics of ``enrich_a_stream``'s FULL and NONE results, the FULL one having loaded its first snapshot."""
    looked_up = [key for key in PROBE_KEYS if key is not None]
    assert full.metrics["hitCount"] == len(looked_up) and full.metrics["unmatchedCount"] == 2  # keys 41 and 99
    assert full.metrics["numCachedRecords"] == len(DIMENSION) and full.metrics["loadCount"] == 1
    assert full.loaded_snapshot is True and full.snapshot == read_pointer(full_spec.snapshots).current.version
    assert none.metrics["loadCount"] == len(looked_up) and none.snapshot is None


class _QueryStarted(StreamingQueryListener):
    """Set when a stream of the session starts."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def onQueryStarted(self, event: object) -> None:
        self.event.set()

    def onQueryProgress(self, event: object) -> None:
        pass

    def onQueryIdle(self, event: object) -> None:
        pass

    def onQueryTerminated(self, event: object) -> None:
        pass


def test_postgres_source_answers_sync_async_and_many_keys_at_once(dimension: str) -> None:
    import asyncio

    source = PostgresLookupSource(
        SourceTable(kind="postgres", connection=dict(PG), table=dimension, key=("id",), columns=("name",))
    )
    try:
        assert sorted(source.lookup((7,))) == [("customer-7",), ("customer-7-bis",)]
        keys = [(3,), (7,), (1000,), *((k,) for k in range(1, 11))]

        async def at_once() -> list:
            return await asyncio.gather(*(source.lookup_async(key) for key in keys))

        found = asyncio.run(at_once())  # more lookups than connections: they wait for a free one
        assert [sorted(rows) for rows in found[:3]] == [[("customer-3",)], [("customer-7",), ("customer-7-bis",)], []]
        assert [sorted(rows) for rows in found[3:]] == [sorted(source.lookup(key)) for key in keys[3:]]
        assert source.lookup((1000,)) == []
        many = source.lookup_many([(7,), (1000,), (3,)])  # one query, results in the keys' order
        assert [sorted(rows) for rows in many] == [[("customer-7",), ("customer-7-bis",)], [], [("customer-3",)]]
    finally:
        source.close()


def test_postgres_source_finds_many_composite_keys_in_one_query(dimension: str) -> None:
    source = PostgresLookupSource(
        SourceTable(kind="postgres", connection=dict(PG), table=dimension, key=("id", "name"), columns=("amount",))
    )
    try:
        keys = [(7, "customer-7-bis"), (3, "customer-4"), (40, "customer-40"), (7, "customer-7")]
        assert source.lookup_many(keys) == [[(Decimal("0.50"),)], [], [(Decimal("10.00"),)], [(Decimal("1.75"),)]]
        assert [source.lookup(key) for key in keys] == [
            [(Decimal("0.50"),)],
            [],
            [(Decimal("10.00"),)],
            [(Decimal("1.75"),)],
        ]
    finally:
        source.close()


def test_timestamps_with_and_without_a_time_zone_come_out_the_same_through_every_cache(
    spark: SparkSession, dimension: str, probe: None, tmp_path: Path
) -> None:
    """``timestamp`` is a wall-clock time (Spark's TIMESTAMP_NTZ, whatever the zones of the JVM, the session or the
    Python workers); ``timestamptz`` an instant. Both paths, per key (psycopg) and snapshot (JDBC), must agree."""
    table = f"{SCHEMA}.events"
    _execute(
        f"CREATE TABLE {table} (id integer PRIMARY KEY, local_time timestamp, instant timestamptz)",
        f"INSERT INTO {table} VALUES (1, '2026-03-29 02:30:00', '2026-03-29 02:30:00+02'), (2, NULL, NULL)",
    )
    instant = datetime.datetime(2026, 3, 29, 0, 30, tzinfo=datetime.UTC)
    expected = {1: (datetime.datetime(2026, 3, 29, 2, 30), int(instant.timestamp()) * 10**6), 2: (None, None)}
    interval = {"lookup.full-cache.periodic-reload.interval": "1 h"}
    _reload(spark, _spec(table, tmp_path, "FULL", **interval))
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")  # neither UTC nor the machine's zone
    try:
        for cache in ("NONE", "PARTIAL", "FULL"):
            job = _join_job(_spec(table, tmp_path, cache, **(interval if cache == "FULL" else {})), tmp_path)
            joined = LookupJoin(spark, job).apply(spark.sql("SELECT * FROM probe WHERE customer_id IN (1, 2)"))
            assert isinstance(joined.schema["local_time"].dataType, TimestampNTZType), cache
            rows = joined.select("customer_id", "local_time", F.unix_micros("instant").alias("micros")).collect()
            found = {row.customer_id: (row.local_time, row.micros) for row in rows}
            assert found == expected, cache
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


def test_a_probe_column_named_like_a_lookup_column_fails_with_one_line(
    spark: SparkSession, dimension: str, tmp_path: Path
) -> None:
    spark.createDataFrame([(1, "x")], "customer_id INT, name STRING").createOrReplaceTempView("probe_clash")
    join = LookupJoin(spark, _join_job(_spec(dimension, tmp_path, "NONE"), tmp_path, probe="SELECT * FROM probe_clash"))

    with pytest.raises(JobError, match=r"column\(s\) \['name'\] are both in the probe side and in lookup table"):
        join.apply(spark.table("probe_clash"))


def test_a_kafka_topic_is_enriched_each_message_once_its_malformed_ones_counted(
    spark: SparkSession, dimension: str, tmp_path: Path
) -> None:
    enrich_a_topic(spark, dimension, tmp_path, "enriched_kafka")


def enrich_a_topic(spark: SparkSession, dimension: str, tmp_path: Path, output: str) -> None:
    """A probe stream from the tests' broker, in two runs: the second reads only what came after the first (the
    offsets in its checkpoint), and the message that is not JSON is left out and counted in the run that read it.
    ``spark`` may be a driver's session or a Spark Connect client's."""
    topic = new_topic("probe")
    probe = [{"row": index, "customer_id": key} for index, key in enumerate(PROBE_KEYS)]
    send(topic, [*probe[:6], "not json {"])
    job = _join_job(
        _spec(dimension, tmp_path, "FULL", **HOURLY),
        tmp_path,
        probe=None,
        probe_stream=KafkaTopicSource("clicks", topic, "row INT, customer_id INT", on_malformed="skip"),
        output=output,
        checkpoint=(tmp_path / f"checkpoint-{output}").as_uri(),
        kafka_connections={"kafka_default": spark_options({"bootstrap.servers": broker()}, "kafka_default")},
    )
    first = run_lookup_join(spark, job, Cancellation())
    send(topic, probe[6:])
    second = run_lookup_join(spark, job, Cancellation())

    assert sorted((tuple(row) for row in spark.table(output).collect()), key=repr) == _expected("left")
    assert first.malformed_skipped == {"clicks": 1} and second.malformed_skipped is None
    first_rows = len([row for row in _expected("left") if row[0] < 6])
    assert (first.rows, second.rows) == (first_rows, len(_expected("left")) - first_rows)
    assert first.loaded_snapshot is True and second.loaded_snapshot is False
