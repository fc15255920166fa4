"""Spark SQL jobs (the foundation): the ``sql`` job kind."""
