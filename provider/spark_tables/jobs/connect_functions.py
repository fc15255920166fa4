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

from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql.streaming.stateful_processor import StatefulProcessor

from spark_tables.core import private_files
from spark_tables.jobs import server_python
from spark_tables.jobs.session_facts import is_connect
from spark_tables.jobs.shipped_code import package_bytes

Function = TypeVar("Function", bound=Callable[..., Any])


def carried_function(spark: SparkSession, function: Function) -> Function:
    """``function`` as a streaming query of ``spark`` runs it (foreachBatch's, ``mapInArrow``'s): itself on a driver,
    with the provider's code over Connect."""
    if not is_connect(spark):
        return function
    return server_python.CarriedFunction(package_bytes(), _pickled(function))  # type: ignore[return-value]


def carried_processor(spark: SparkSession, processor: StatefulProcessor) -> StatefulProcessor:
    """``processor`` as ``spark``'s transformWithState takes it: itself on a driver, with the provider's code over
    Connect."""
    if not is_connect(spark):
        return processor
    return server_python.CarriedProcessor(package_bytes(), _pickled(processor))


def _pickled(carried: object) -> bytes:
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(server_python)  # the server cannot import it: it goes with the object
    cloudpickle.register_pickle_by_value(private_files)  # nor what it imports of the provider
    return cloudpickle.dumps(carried)
