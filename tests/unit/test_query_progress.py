"""A streaming query's progress read the same way from a driver's query and a Spark Connect client's: the shapes
below are pyspark 4.2's (a Connect client's progress is made from the server's JSON of it)."""

from __future__ import annotations

from pyspark.sql import Row

from spark_tables.jobs.streaming.progress import input_rows, observed_metrics

SOURCES = [
    {"description": "FileStreamSource[file:/data/views]", "numInputRows": 2000},
    {"description": "FileStreamSource[file:/checkpoints/q-flush-requests]", "numInputRows": 16},
]


def test_input_rows_are_added_up_from_the_sources_with_or_without_the_progress_total():
    driver = {"numInputRows": 2016, "sources": SOURCES}
    connect = {"sources": SOURCES}  # the server's JSON leaves the total out

    assert input_rows(driver) == input_rows(connect) == 2016
    assert input_rows(connect, leave_out="/checkpoints/q-flush-requests") == 2000
    assert input_rows({"sources": [{"description": "x", "numInputRows": None}]}) == 0
    assert input_rows({}) == 0


def test_observed_metrics_come_by_column_from_a_drivers_row_and_from_a_connect_clients_json():
    driver = {"observedMetrics": {"buffer": Row(emitted=100, end=1)}}
    schema = {"type": "struct", "fields": [{"name": "emitted", "type": "long"}, {"name": "end", "type": "integer"}]}
    connect = {"observedMetrics": {"buffer": Row(values=[100, 1], schema=schema)}}

    assert observed_metrics(driver, "buffer") == observed_metrics(connect, "buffer") == {"emitted": 100, "end": 1}
    assert observed_metrics(driver, "other") is None
    assert observed_metrics({}, "buffer") is None
