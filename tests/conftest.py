"""How the test files are shared out among pytest-xdist's workers (``scripts/test.sh`` runs ``--dist loadfile``).

Each file's tests run in one worker, in order, sharing its fixtures, as ``--dist loadfile`` does; except the files
of one of :data:`SHARED_SESSIONS`, which run in one worker together, so that what they share for the whole session
(a Spark standalone cluster, Airflow's services) is started once, not once a worker, and never runs twice at once on
this 2-core machine. (xdist's own ``--dist loadgroup`` would group them by a mark, but it renames the tests' ids to
do it, which pytest 9 no longer lets it: it groups nothing.)

The slow work is handed out first (:func:`pytest_collection_modifyitems`), so that the many short files of
``tests/spark`` and ``tests/unit`` fill the end of the run. xdist's own order (most tests first) handed out the
slowest files, which have a few long tests each, last: one of them alone set the run's last minutes.

And the Java option every Spark JVM the tests start gets (:data:`QUICK_JIT`): the suite is bound by this machine's
CPU, and Spark's JVMs spent the most of it.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import pytest

#: The Java option of the tests' Spark JVMs (drivers through ``SPARK_SUBMIT_OPTS``, the shared session's too, and
#: the standalone workers' executors): their jobs last seconds, and C2's compiler threads spent more CPU than they
#: saved on this 2-core machine. With C1 alone, one ``airflow dags test example_spark_cache`` took 75 s of CPU
#: against 121 s, and 60 s against 76 s end to end (2026-11-27, two runs each, nothing else running). Not the
#: product's default: a long job gains from C2.
QUICK_JIT = "-XX:TieredStopAtLevel=1"


#: The conf of every Spark application the tests start, as Java system properties of its driver (``spark.*``
#: properties are Spark's defaults: ``SparkConf`` reads them), in :data:`SPARK_SUBMIT_OPTIONS`: their Delta tables are
#: small, and Delta computes a table's log state in 50 tasks by default, most of a small Delta statement's time on 2
#: cores (4 tests: 46 s -> 15 s). Not the product's default. (A ``spark-defaults.conf`` would put its folder on the
#: class path, which the drivers' class-data archive refuses: "Cannot have non-empty directory in paths".)
SMALL_DELTA_TABLES = {"spark.databricks.delta.snapshotPartitions": "2"}
#: ``SPARK_SUBMIT_OPTS`` of the tests' spark-submits: :data:`QUICK_JIT` and :data:`SMALL_DELTA_TABLES`.
SPARK_SUBMIT_OPTIONS = " ".join([QUICK_JIT, *(f"-D{key}={value}" for key, value in SMALL_DELTA_TABLES.items())])


def pytest_configure(config: pytest.Config) -> None:
    """Every process the tests start inherits :data:`SPARK_SUBMIT_OPTIONS` for the spark-submits it runs."""
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if SPARK_SUBMIT_OPTIONS not in options:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{options} {SPARK_SUBMIT_OPTIONS}".strip()


#: Groups of test files that use the same session fixtures, by the name of the group; a group's files run in the
#: order given.

SHARED_SESSIONS = {
    # the Spark standalone cluster, the Airflow services whose Spark it is (``cluster_airflow``), their runs of the
    # examples in session mode (``cluster_examples``, on a Spark Connect server of the cluster), and a second server
    # on it; the durable jobs first, per job: their drivers need both workers' cores, and a server holds one
    "spark_cluster": (
        "tests/integration/test_durable_jobs.py",
        "tests/integration/test_cluster.py",
        "tests/integration/test_monitoring_browser.py",
        "tests/integration/test_session_on_cluster.py",
    ),
    # Airflow as deployed (scheduler, Celery worker, ...) on local Spark: the ``airflow`` fixture
    "airflow_services": (
        "tests/integration/test_as_deployed.py",
        "tests/integration/test_cache_scheduler.py",
        "tests/integration/test_ctas_scheduler.py",
        "tests/integration/test_monitoring_scheduler.py",
    ),
    # the tests of session mode itself and of the scenarios run in both modes, on session mode's Spark Connect
    # server (``connect_server``) and the Airflow whose Spark it is (``in_session``); the other files that run
    # their jobs there (docs/testing.md) are not grouped: a worker starts its own server when it first needs one
    "spark_connect": (
        "tests/integration/test_cache.py",
        "tests/integration/test_ctas_interrupted.py",
        "tests/integration/test_example_dag.py",
        "tests/integration/test_session_mode.py",
        "tests/integration/test_kafka_plans.py",
        "tests/integration/test_object_storage.py",
    ),
    # the Delta Lake tests, on a Spark Connect server whose catalog loads Delta (``delta_server``)
    "delta_server": (
        "tests/integration/test_delta_catalog.py",
        "tests/integration/test_delta_ctas.py",
        "tests/integration/test_delta_streams.py",
        "tests/integration/test_delta_lookups.py",
    ),
}
_GROUP_OF_FILE = {path: group for group, paths in SHARED_SESSIONS.items() for path in paths}
_PLACE_IN_GROUP = {path: place for paths in SHARED_SESSIONS.values() for place, path in enumerate(paths)}


def scope_of(file: str) -> str:
    """The unit of work a worker takes whole: the test file, or the group it is in."""
    return _GROUP_OF_FILE.get(file, file)


#: The units handed out first, in this order: the longest by the sum of their tests' times (2026-11-26), the
#: README's (one Spark application at a time) between the two sets of Airflow services, so that those do not start
#: together, then the Spark Connect servers'. The rest follow in the order pytest collects them: the other
#: integration files, then ``tests/spark``, then ``tests/unit``.
SLOWEST_FIRST = (
    "spark_cluster",
    "tests/integration/test_readme_snippets.py",
    "airflow_services",
    "spark_connect",
    "delta_server",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests in the order their units are to be handed out: :data:`SLOWEST_FIRST`, then as collected; a group's
    files in the order :data:`SHARED_SESSIONS` gives (a file's own tests keep their order). The scheduler below takes
    units in the order of their first test."""
    rank = {unit: position for position, unit in enumerate(SLOWEST_FIRST)}

    def place(item: pytest.Item) -> tuple[int, int]:
        file = item.nodeid.split("::", 1)[0]
        return rank.get(scope_of(file), len(rank)), _PLACE_IN_GROUP.get(file, 0)

    items.sort(key=place)


T = TypeVar("T")
#: What each group's session fixtures started and must stop, by group: ended once the group's last test is done.
_GROUP_ENDINGS: dict[str, list[Callable[[], None]]] = defaultdict(list)


@contextlib.contextmanager
def for_the_group(group: str, services: AbstractContextManager[T]) -> Iterator[T]:
    """Enter ``services`` (a session fixture's Airflow, Spark cluster, server) for the tests of ``group`` alone: they
    are stopped as soon as the group's last test has run, not when the worker's session ends, so that idle services
    do not take this 2-core machine's CPU from the tests that follow (a scheduler, a DAG processor and a cluster's
    JVMs keep working while idle). Only for fixtures no test outside the group uses."""
    stack = contextlib.ExitStack()
    value = stack.enter_context(services)
    _GROUP_ENDINGS[group].append(stack.close)
    try:
        yield value
    finally:
        stack.close()  # nothing left to close once the group's end closed it


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a group's last test and its fixtures' teardown (the next test is of another unit, or none: xdist holds a
    worker's last test back until it knows the next), end what the group's session fixtures started."""
    yield
    group = _GROUP_OF_FILE.get(item.nodeid.split("::", 1)[0])
    if group is None:
        return
    if nextitem is None or scope_of(nextitem.nodeid.split("::", 1)[0]) != group:
        for end in reversed(_GROUP_ENDINGS.pop(group, [])):
            end()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the groups above: xdist's public hook for a scheduler of one's own, on xdist's own
    file scheduler, whose ``_split_scope`` (a test id's file) is its one private part used here
    (``tests/unit/test_xdist_groups.py`` checks it)."""
    if config.getvalue("dist") != "loadfile":
        return None
    config.option.loadscopereorder = False  # xdist's --no-loadscope-reorder: units in the order collected
    from xdist.scheduler import LoadFileScheduling

    class SharedSessionScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(super()._split_scope(nodeid))

    return SharedSessionScheduling(config, log)


@pytest.fixture
def s3_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A bucket on a real S3-compatible server on loopback (moto's), reached through fsspec's s3fs."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "plan-tests",
        "AWS_SECRET_ACCESS_KEY": "plan-tests",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
    }.items():
        monkeypatch.setenv(name, value)
    import fsspec

    bucket = f"bucket-{uuid.uuid4().hex[:12]}"  # moto keeps its buckets in the process: a new server does not forget
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
    yield f"s3://{bucket}"
    server.stop()
    fsspec.get_filesystem_class("s3").clear_instance_cache()  # file systems made for this server go with it
