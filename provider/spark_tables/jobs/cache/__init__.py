"""Cached tables inside a job: each becomes a temporary view, read from a whole copy or computed and written."""
