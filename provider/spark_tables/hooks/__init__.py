"""Hooks: they own the connections (Spark, catalog) and all I/O with spark-submit."""
