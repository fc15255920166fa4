"""The streaming aggregation job: Spark's own aggregation in update mode, buffered, into an upsert sink."""
