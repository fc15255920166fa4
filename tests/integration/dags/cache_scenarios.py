"""DAGs the cached-table integration tests run: one cached table b, used, damaged, invalidated and released; on files
in either mode, or in a Spark Connect server's memory."""

from __future__ import annotations

import datetime
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import DAG, task

from spark_tables.core.cache.claims import claim_file_name
from spark_tables.core.cache.layout import (
    CLAIMS,
    RUN_MARKER,
    cache_folder_name,
    claims_folder,
    memory_parts,
    run_folder,
)
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.names import flat_name
from spark_tables.hooks.spark_connect_job import ConnectServer, connect_session
from spark_tables.operators.cache import SparkCacheInvalidateOperator, SparkCacheSweepOperator, release_caches
from spark_tables.operators.sql import SparkSqlJobOperator
from spark_tables.utils import settings

#: An expensive column (a SHA-256 per row) aggregated to 100 keys, over 4 partitions; on files in either mode (the
#: lifecycle damages its copy on disk).
B = CachedTable(
    "b",
    query="""SELECT id % 100 AS k, count(*) AS n, max(sha2(CAST(id AS STRING), 256)) AS h
             FROM range(0, 200000, 1, 4) GROUP BY id % 100""",
    storage="files",
)
#: b where its mode keeps it by default: in session mode, in the Spark Connect server's memory.
B_AUTO = CachedTable("b", query=B.query)
#: b, failing while it is computed in a job whose Spark conf says so (the same definition for every consumer).
FAILING_B = CachedTable(
    "b",
    query="""SELECT id % 100 AS k, count(*) AS n,
                    max(IF('${spark.spark_tables_test.fail_b}' = 'true', raise_error('b fails here'),
                           sha2(CAST(id AS STRING), 256))) AS h
             FROM range(0, 200000, 1, 4) GROUP BY id % 100""",
    storage="files",
)
C = CachedTable("c", query="SELECT id AS k, sha2(CAST(id AS STRING), 256) AS h FROM range(0, 50000, 1, 2)")
#: c on files in either mode, as b: the quota of the cache root counts both.
C_FILES = CachedTable("c", query=C.query, storage="files")
_DAG = {"schedule": None, "start_date": pendulum.datetime(2026, 11, 1, tz="UTC"), "catchup": False}
#: The DAGs of single flight under Airflow as deployed: their jobs in session mode, on the Spark Connect server of
#: connection ``spark_session`` (what they test is the claims, the waits in the triggerer and the copies' files).
_IN_SESSION = {**_DAG, "default_args": {"conn_id": "spark_session"}}
#: Values of every kind Airflow's own XCom serialization handles, to round-trip through the provider's backend.
ORDINARY_VALUES: dict[str, Any] = {
    "nested": {"rows": [[1, "a", None, 2.5, True]], "empty": {}},
    "when": datetime.datetime(2026, 11, 22, 10, 30, tzinfo=datetime.UTC),
    "pair": (1, "two"),
    "text": "spark_tables.cache.b",
    "looks_like_a_descriptor_but_is_not": {"type": "other", "location": "/tmp"},
}


def _consumer(task_id: str, table: CachedTable = B, **kwargs: Any) -> SparkSqlJobOperator:
    """A task that reads every column of a cached table, the expensive one included."""
    sql = f"SELECT count(*) AS keys, max(h) AS h FROM {table.name}"
    return SparkSqlJobOperator(task_id=task_id, sql=sql, caches=[table], **kwargs)


def _all_started(*task_ids: str) -> Any:
    """A ``pre_execute`` that waits until each of ``task_ids`` of this run has started, so that each looks its cached
    table up before any has registered a copy (a copy takes seconds to compute, the wait ends at once)."""

    def wait(context: Any) -> None:
        ti = context["ti"]
        folder = Path(os.environ["AIRFLOW_HOME"]) / "started" / flat_name([ti.dag_id, ti.run_id])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ti.task_id).touch()
        ends = time.monotonic() + 120
        while not set(task_ids) <= {path.name for path in folder.iterdir()}:
            if time.monotonic() > ends:
                raise TimeoutError(f"not all consumers started: {sorted(p.name for p in folder.iterdir())}")
            time.sleep(0.1)

    return wait


def _claimed(context: Any) -> None:
    """A ``pre_execute`` that waits until a consumer of this run has claimed ``FAILING_B``, so that this one finds it
    claimed, or its claim ended without a copy."""
    ti = context["ti"]
    claims = Path(claims_folder(run_folder(settings.cache_uri(), ti.dag_id, ti.run_id)).removeprefix("file://"))
    first = claims / claim_file_name(cache_folder_name(FAILING_B), 1)
    ends = time.monotonic() + 120
    while not (first.exists() and first.stat().st_size):
        if time.monotonic() > ends:
            raise TimeoutError(f"no consumer claimed b: {first} is not there")
        time.sleep(0.1)


#: The consumers that start together.
TOGETHER = ("one", "other")
FOUR = tuple(f"consumer_{n}" for n in range(4))


def _files_of_this_run(ti: Any) -> list[str]:
    """Every file of the copies under this run's cache folder (not the run marker, nor the claims)."""
    folder = run_folder(settings.cache_uri(), ti.dag_id, ti.run_id).removeprefix("file://")
    return sorted(
        os.path.relpath(os.path.join(root, name), folder)
        for root, _, names in os.walk(folder)
        for name in names
        if name != RUN_MARKER and os.path.relpath(root, folder) != CLAIMS
    )


@task
def push_ordinary_values(ti: Any = None) -> dict[str, Any]:
    ti.xcom_push(key="pushed", value=ORDINARY_VALUES)
    return ORDINARY_VALUES


#: ``ORDINARY_VALUES`` as the common-io provider's object-storage backend gives them back, alone or beside the
#: registry: its files hold JSON, so the tuple comes back a list.
FROM_OBJECT_STORAGE: dict[str, Any] = {**ORDINARY_VALUES, "pair": [1, "two"]}


@task
def pull_ordinary_values(read_back: str = "as pushed", ti: Any = None) -> bool:
    """Both values read back as the backend that keeps them gives them: ``as pushed`` (Airflow's own), or ``as
    JSON`` (the object-storage backend)."""
    expected = ORDINARY_VALUES if read_back == "as pushed" else FROM_OBJECT_STORAGE
    returned = ti.xcom_pull(task_ids="push_ordinary_values")
    pushed = ti.xcom_pull(task_ids="push_ordinary_values", key="pushed")
    assert returned == expected, returned
    assert pushed == expected, pushed
    return True


with DAG(dag_id="cache_lifecycle", **_DAG):

    @task
    def nothing_yet(ti: Any = None) -> list[str]:
        return _files_of_this_run(ti)

    @task
    def lose_a_partition(ti: Any = None) -> str:
        copy = ti.xcom_pull(task_ids="first", key=B.registry_key)  # read back as a descriptor by the backend
        lost = copy.partitions[0].file
        os.remove(os.path.join(copy.location.removeprefix("file://"), lost))
        return lost

    @task
    def after_invalidating(ti: Any = None) -> list[str]:
        return _files_of_this_run(ti)

    (
        nothing_yet()
        >> _consumer("first")
        >> _consumer("second")
        >> lose_a_partition()
        >> _consumer("third")
        >> SparkCacheInvalidateOperator(task_id="forget_b", caches=[B])
        >> after_invalidating()
        >> _consumer("fourth")
        >> push_ordinary_values()
        >> pull_ordinary_values()
    )
    release_caches()


def spark_tables_views(url: str) -> list[str]:
    """The cached tables' global temporary views on the Spark Connect server at ``url``, cached or not."""
    with connect_session(url) as spark:
        return sorted(t.name for t in spark.catalog.listTables("global_temp") if t.name.startswith("spark_tables_"))


with DAG(dag_id="cache_in_memory", **_DAG):

    @task
    def uncache_b(ti: Any = None) -> str:
        """The server loses b's copy (its view uncached, as a restart would lose it), through a session of its own."""
        copy = ti.xcom_pull(task_ids="first", key=B_AUTO.registry_key)
        view = memory_parts(copy.location)[1]
        with connect_session(ConnectServer.of(copy.server).session_url(str(uuid.uuid4()))) as spark:
            spark.sql(f"UNCACHE TABLE {view}")
        return view

    @task
    def views_after_invalidating() -> list[str]:
        return spark_tables_views(ConnectServer.of("spark_default").session_url(str(uuid.uuid4())))

    (
        _consumer("first", B_AUTO)
        >> _consumer("second", B_AUTO)
        >> uncache_b()
        >> _consumer("third", B_AUTO)
        >> SparkCacheInvalidateOperator(task_id="forget_b", caches=[B_AUTO])
        >> views_after_invalidating()
        >> _consumer("fourth", B_AUTO)
    )
    release_caches()

with DAG(dag_id="cache_beside_object_storage", **_DAG):
    # Run with ``[spark_tables] other_xcom_backend`` naming the common-io provider's object-storage backend.
    _consumer("first") >> _consumer("second") >> push_ordinary_values() >> pull_ordinary_values("as JSON")
    release_caches()

with DAG(dag_id="cache_quota", **_DAG):
    # Run with a quota one copy exceeds: writing c evicts b, which b's next user computes again.
    _consumer("use_b") >> _consumer("use_c", C_FILES) >> _consumer("use_b_again")
    release_caches()

with DAG(dag_id="cache_memory_quota", **_DAG):
    # In session mode, with a memory quota one copy exceeds: keeping c in the server's memory releases b there,
    # which b's next user computes again.
    @task
    def views_after_c() -> list[str]:
        return spark_tables_views(ConnectServer.of("spark_default").session_url(str(uuid.uuid4())))

    _consumer("use_b", B_AUTO) >> _consumer("use_c", C) >> views_after_c() >> _consumer("use_b_again", B_AUTO)
    release_caches()

with DAG(dag_id="cache_clear", **_IN_SESSION):
    _consumer("writer")

with DAG(dag_id="cache_concurrent", max_active_runs=2, **_IN_SESSION):

    @task
    def copies_before_release(ti: Any = None) -> list[str]:
        """The copies this run's cache folder holds before its release: ``<cache>/<copy>``."""
        folder = Path(run_folder(settings.cache_uri(), ti.dag_id, ti.run_id).removeprefix("file://"))
        return sorted(
            f"{cache.name}/{copy.name}"
            for cache in folder.iterdir()
            if cache.is_dir() and cache.name != CLAIMS
            for copy in cache.iterdir()
        )

    (
        [_consumer(task_id, pre_execute=_all_started(*TOGETHER)) for task_id in TOGETHER]
        >> _consumer("reader")
        >> copies_before_release()
    )
    release_caches()

with DAG(dag_id="cache_four_consumers", **_IN_SESSION):
    # Four consumers of b start together: one computes it, three wait for its copy.
    [_consumer(task_id, pre_execute=_all_started(*FOUR)) for task_id in FOUR]
    release_caches()

with DAG(dag_id="cache_writer_fails", **_IN_SESSION):
    # The consumer that claims b first fails while computing it; of the two waiting for it, one takes over.
    fails = {"spark.spark_tables_test.fail_b": "true"}
    _consumer("writer", FAILING_B, conf=fails)
    [
        _consumer(task_id, FAILING_B, conf={"spark.spark_tables_test.fail_b": "false"}, pre_execute=_claimed)
        for task_id in ("waiter_1", "waiter_2")
    ]
    release_caches()

with DAG(dag_id="cache_sweep", **_DAG):
    SparkCacheSweepOperator(task_id="sweep")
