"""Spark's log lines of known harmless causes are counted and summed up; every other line passes on as it is."""

from __future__ import annotations

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog
from spark_tables.core.spark_log import LineTally
from spark_tables.hooks.spark_job import SparkJobHook
from tests.unit.test_spark_job_hook import SPEC

#: Lines as a driver of an EXECUTE PLAN job wrote them (pyspark 4.2, local[2]).
STATE_SERVER = (
    "26/11/26 11:20:12 WARN TransformWithStateInPySparkStateServer: Value state first_seen doesn't contain a value."
)
HOSTNAME = (
    "26/11/26 11:19:58 WARN Utils: Your hostname, vm, resolves to a loopback address: 127.0.1.1; using 10.0.0.5 "
    "instead (on interface eth0)"
)
HARMLESS = [
    HOSTNAME,
    "26/11/26 11:19:58 WARN Utils: Set SPARK_LOCAL_IP if you need to bind to another address",
    "26/11/26 11:19:59 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform... using "
    "builtin-java classes where applicable",
    "WARNING: Using incubator modules: jdk.incubator.vector",
    "26/11/26 11:00:16 WARN Utils: Service 'SparkUI' could not bind on port 4040. Attempting port 4041.",
    "26/11/26 11:20:05 WARN ResolveWriteToStream: spark.sql.adaptive.enabled is not supported in streaming "
    "DataFrames/Datasets and will be disabled.",
    "26/11/26 11:20:05 WARN MicroBatchExecution: Disabling AQE since AQE is not supported in stateful workloads.",
    "26/11/26 11:20:01 WARN HiveExternalCatalog: Couldn't find corresponding Hive SerDe for data source provider "
    "json. Persisting data source table `spark_catalog`.`plan_demo`.`orders` into Hive metastore in Spark SQL "
    "specific format, which is NOT compatible with Hive.",
    "26/11/26 12:34:30 WARN TransformWithStateInPySparkStateServer: No more data to read from the socket",
    "26/11/26 12:33:04 WARN log: Updating partition stats fast for: order_snapshot_20261126",
    "26/11/26 12:33:04 WARN log: Updated size to 150044",
    "26/11/26 11:20:00 WARN HiveConf: HiveConf of name hive.internal.ss.authz.settings.applied.marker does not exist",
    "26/11/26 11:20:00 WARN SessionState: METASTORE_FILTER_HOOK will be ignored, since "
    "hive.security.authorization.manager is set to instance of HiveAuthorizerFactory.",
]
#: Lines that say something about the job: passed on as they are, though some look like the ones above.
KEPT = [
    "26/11/26 11:20:12 WARN TransformWithStateInPySparkStateServer: Value state first_seen is not initialized.",
    "26/11/26 11:20:12 WARN TransformWithStateInPySparkStateServer: Map state totals doesn't contain key [1].",
    "26/11/26 11:20:03 WARN TaskSetManager: Lost task 0.0 in stage 3.0 (TID 7) (10.0.0.5 executor driver): "
    "java.io.IOException: No space left on device",
    "26/11/26 11:20:04 ERROR Utils: Aborting task",
    "26/11/26 12:34:31 WARN UnsupportedOperationChecker: Detected pattern of possible 'correctness' issue due to "
    "global watermark. The query contains stateful operation which can emit rows older than the current watermark",
    "26/11/26 11:20:04 INFO spark_tables: statement 1/2: CREATE TABLE t",
]


def test_each_harmless_line_is_counted_and_no_other_line_is():
    tally = LineTally()
    assert [line for line in HARMLESS if tally.admit(line)] == []
    assert [line for line in KEPT if tally.admit(line)] == KEPT
    assert tally.summary().startswith(f"{len(HARMLESS)} Spark warnings of known harmless causes, not shown: ")


def test_nothing_counted_is_no_line():
    tally = LineTally()
    assert tally.admit(KEPT[0]) and tally.summary() is None


def test_the_sum_is_one_line_of_each_message_with_its_count_under_why_in_the_order_first_seen():
    tally = LineTally()
    for line in [HOSTNAME, *[STATE_SERVER] * 180, STATE_SERVER.replace("first_seen", "accumulator"), HOSTNAME]:
        tally.admit(line)
    assert tally.summary() == (
        "183 Spark warnings of known harmless causes, not shown: [the address Spark chose; SPARK_LOCAL_IP sets "
        "another] 2 x Utils: Your hostname, vm, resolves to a loopback address: 127.0.1.1; using 10.0.0.5 instead "
        "(on interface eth0); [a key's state read before it has any: one per new key] 180 x "
        "TransformWithStateInPySparkStateServer: Value state first_seen doesn't contain a value., 1 x "
        "TransformWithStateInPySparkStateServer: Value state accumulator doesn't contain a value."
    )


def test_the_task_log_gets_the_other_lines_as_they_come_and_the_sum_when_the_driver_ends(
    spark_tables_home, monkeypatch: pytest.MonkeyPatch
):
    hook = SparkJobHook(spec=SPEC, catalog=EmbeddedCatalog(home=str(spark_tables_home)))
    logged: list[str] = []
    monkeypatch.setattr(hook.log, "info", lambda message, *args: logged.append(message % args if args else message))
    lines = iter([KEPT[3], *[STATE_SERVER] * 3, KEPT[1]])
    passed = list(hook.watch_log(lines))
    assert passed == [KEPT[3], KEPT[1]]
    assert logged == [
        "3 Spark warnings of known harmless causes, not shown: [a key's state read before it has any: one per new "
        "key] 3 x TransformWithStateInPySparkStateServer: Value state first_seen doesn't contain a value."
    ]
