"""A streaming query's Python, as each mode needs it: foreachBatch's functions, and the functions and
transformWithState processors of its plan.

On a driver (spark-submit) Spark calls them in the job's own process, or in processes that import the zip
spark-submit ships. Over Spark Connect (session mode) the client pickles them and the server runs them in Python
processes where this provider cannot be imported: its driver's, and its executors' workers for a streaming query,
whose micro-batches run without the session's Python files. They then travel with the provider's code
(``server_python``). Either way a foreachBatch function must hold no Spark session (each batch brings its own,
``batch.sparkSession``: in session mode one on the job's session) and must tell the job what it did through files,
not through its own attributes, which in session mode change only in the server's copy.
"""

from __future__ import annotations

from typing import TypeVar

from pyspark.sql import SparkSession

from spark_tables.core import private_files
from spark_tables.jobs import server_python
from spark_tables.jobs.session_facts import is_connect
from spark_tables.jobs.shipped_code import package_bytes

Code = TypeVar("Code")


def carried(spark: SparkSession, code: Code) -> Code:
    """``code`` (foreachBatch's or ``mapInArrow``'s function, a transformWithState processor) as a streaming
    query of ``spark`` runs it: itself on a driver; over Connect, with the provider's zip, ``server_python`` and what
    it imports of the provider pickled by value by the cloudpickle Spark's client pickles with, since the server
    cannot import them."""
    if not is_connect(spark):
        return code
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(server_python)
    cloudpickle.register_pickle_by_value(private_files)
    return server_python.Carried(package_bytes(), code)  # type: ignore[return-value]
