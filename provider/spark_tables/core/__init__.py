"""Shared by the Airflow side and the Spark side: job specs, identifiers, catalog settings.

Nothing here imports Airflow or Spark.
"""
