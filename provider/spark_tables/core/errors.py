"""Errors raised while validating what a DAG author asked for, before anything runs."""

import re

#: The line of a Python traceback that names what was raised: ``ModuleNotFoundError: No module named 'x'``.
_RAISED = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*: \S")
#: A Java exception's class before a Spark error class: ``org.apache.spark.SparkException: [JDBC_...] ...``.
_JAVA_SPARK_ERROR = re.compile(r"(?:[\w$]+\.)+[\w$]+: (?=\[[A-Z_.]+\] )")
#: How Spark begins a streaming query's failure, before the error that ended the query.
_STREAM_FAILED = re.compile(r"\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ")
#: A Python traceback in an error's message (a foreachBatch function's, as Spark passes it back).
_TRACEBACK = "Traceback (most recent call last):"
#: How Spark begins the message of an error raised in its Python workers (a UDF's, mapInArrow's function).
_PYTHON_WORKER = "An exception was thrown from the Python worker"


class SpecError(ValueError):
    """Bad input: the message is one line naming what is wrong and what to do."""


class JobError(RuntimeError):
    """A job failed in a way it can name itself: the message is one line."""


def one_line(error: BaseException) -> str:
    """The first line of an error's message, prefixed by its type unless the message names its own class.

    A Spark error class's message is kept whole up to its ``SQLSTATE``: some explain themselves on the lines after
    the first (``INSERT_COLUMN_ARITY_MISMATCH`` gives the table's and the query's columns there); the query context
    (``== SQL ==``) and the plan that may follow are left out. An error of Spark's Python workers, or one carrying a
    Python traceback (a streaming query's foreachBatch function's), gives what the traceback says was raised last,
    not the line that announces a traceback; a streaming query's failure, the error that ended it.
    """
    if isinstance(error, SpecError | JobError):
        return str(error)
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("An error occurred while calling"):  # py4j: the cause comes next
        lines = lines[1:]
        lines[0] = lines[0].removeprefix(": ")
        if (java := _JAVA_SPARK_ERROR.match(lines[0])) is not None:  # a Java exception carrying Spark's error class
            lines[0] = lines[0][java.end() :]
            return _spark_message(lines)
        lines = lines[:1]
    if lines and (stream := _STREAM_FAILED.match(lines[0])) is not None:  # a streaming query's: what ended it
        lines[0] = lines[0][stream.end() :]
    first = lines[0] if lines else ""
    if first.startswith(_PYTHON_WORKER) or any(_TRACEBACK in line for line in lines):
        context = next((i for i, line in enumerate(lines) if line.startswith("==")), len(lines))  # a query's context
        raised = [line for line in lines[1:context] if _RAISED.match(line) and not line.startswith("SQLSTATE")]
        first = raised[-1] if raised else first
        if (java := _JAVA_SPARK_ERROR.match(first)) is not None:  # a Spark error raised in Python: its class says it
            return _spark_message([first[java.end() :]])
    elif first.startswith("["):  # Spark's error classes: "[TABLE_OR_VIEW_NOT_FOUND] The table ..."
        return _spark_message(lines)
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _spark_message(lines: list[str]) -> str:
    """A Spark error class's lines, joined up to the one with its ``SQLSTATE``, before any ``==`` context."""
    kept = [lines[0]]
    for line in lines[1:]:
        if "SQLSTATE" in kept[-1] or line.startswith("=="):
            break
        kept.append(line)
    return " ".join(kept) if "SQLSTATE" in kept[-1] else lines[0]
