"""Apache Airflow provider for Flink-style table programs on Spark.

This package root is shipped to Spark drivers and executors with ``core`` and ``jobs``:
it must never import Airflow or Spark.
"""

__version__ = "0.1.0"
