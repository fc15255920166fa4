"""A task's Spark settings are checked as the DAG is parsed: one line naming the setting, before anything runs."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.operators.sql import SparkSqlJobOperator


def _operator(**settings: object) -> SparkSqlJobOperator:
    return SparkSqlJobOperator(task_id="t", sql="SELECT 1", **settings)


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"conf": "spark.sql.shuffle.partitions=4"}, "conf must be a dict of Spark setting names to values, not str"),
        ({"conf": {"spark.x": {"nested": 1}}}, "conf: spark.x={'nested': 1} is not a value Spark takes"),
        ({"conf": {"spark.x": None}}, "conf: spark.x=None is not a value Spark takes"),
        ({"conf": {5: "a"}}, "conf: the setting name 5 is not a name"),
        ({"driver_memory": "2 GB"}, "driver_memory='2 GB' is not a JVM memory size: write it as spark-submit does"),
        ({"executor_memory": 2048}, "executor_memory=2048 is not a JVM memory size"),
        ({"executor_cores": 0}, "executor_cores=0 is invalid: give a whole number from 1"),
        ({"num_executors": "2"}, "num_executors='2' is invalid"),
    ],
)
def test_a_setting_spark_does_not_take_fails_in_one_line_at_parse_time(settings: dict, error: str) -> None:
    with pytest.raises(SpecError) as caught:
        _operator(**settings)
    assert str(caught.value).startswith(error) and "\n" not in str(caught.value)


def test_settings_spark_takes_are_kept() -> None:
    conf = {"spark.sql.shuffle.partitions": 4, "spark.ui.enabled": False, "spark.app.x": "{{ ds }}"}
    operator = _operator(conf=conf, driver_memory="2g", executor_memory="512M", executor_cores=2, num_executors=3)
    assert operator.conf == conf and operator.driver_memory == "2g"


def test_caches_must_be_cached_table_declarations() -> None:
    with pytest.raises(TypeError, match="caches must hold CachedTable declarations, not str"):
        _operator(caches=["b"])
