"""The check of the folders a job's executors share with its driver, on local Spark: driver and executors are one
JVM there, so it costs nothing, not even a Spark job."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from spark_tables.jobs.shared_folders import check_shared_folders


def test_on_a_local_master_no_folder_is_probed(spark: SparkSession, tmp_path: Path) -> None:
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup(None)

    check_shared_folders(spark, {"[spark_tables] cache_uri": f"file://{tmp_path}/cache"})

    assert not (tmp_path / "cache").exists()
    assert spark.sparkContext.statusTracker().getJobIdsForGroup(None) == jobs_before
