"""Shared by the Airflow side and the Spark side: job specs, identifiers, durations, catalog settings, and a
sub-package per capability (``sql``, ``ctas``, ``cache``, ``lookup``) with its declarations.

Shipped to Spark drivers and executors: nothing here imports anything outside the standard library.
"""
