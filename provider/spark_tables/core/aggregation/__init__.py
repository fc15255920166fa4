"""Streaming aggregations written by Spark's own stateful aggregation, their output buffered (FLIP-365)."""
