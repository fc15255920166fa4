from __future__ import annotations

import pytest

from spark_tables.core.errors import JobError, SpecError, one_line


class AnalysisException(Exception):
    """Stands in for pyspark.errors.AnalysisException: only its message matters here."""


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            AnalysisException(
                "[TABLE_OR_VIEW_NOT_FOUND] The table or view `t` cannot be found. SQLSTATE: 42P01; line 1 pos 14;\n"
                "'Project [*]\n+- 'UnresolvedRelation [t], [], false\n"
            ),
            "[TABLE_OR_VIEW_NOT_FOUND] The table or view `t` cannot be found. SQLSTATE: 42P01; line 1 pos 14;",
        ),
        (
            AnalysisException("\n  [PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'.\n== SQL ==\nSELEC 1"),
            "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'.",
        ),
    ],
)
def test_spark_error_classes_keep_their_first_line_without_the_type(error, line):
    assert one_line(error) == line


@pytest.mark.parametrize(
    ("message", "line"),
    [
        (  # Spark 4.2's own words, as an INSERT of too few columns gives them
            "[INSERT_COLUMN_ARITY_MISMATCH.NOT_ENOUGH_DATA_COLUMNS] Cannot write to `spark_catalog`.`demo`.`daily`, "
            "the reason is not enough data columns:\nTable columns: `day`, `total`, `n`.\nData columns: `day`, `total`."
            " SQLSTATE: 21S01",
            "[INSERT_COLUMN_ARITY_MISMATCH.NOT_ENOUGH_DATA_COLUMNS] Cannot write to `spark_catalog`.`demo`.`daily`, "
            "the reason is not enough data columns: Table columns: `day`, `total`, `n`. Data columns: `day`, `total`."
            " SQLSTATE: 21S01",
        ),
        (
            "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012\n== SQL (line 1, position 8) ==\nSELECT 1/0\n  ^^^",
            "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012",
        ),
        (  # no SQLSTATE to end on: only the first line, as before
            "[SOME_ERROR] First line:\nsecond line\nthird line",
            "[SOME_ERROR] First line:",
        ),
    ],
)
def test_a_spark_error_class_that_explains_itself_on_later_lines_keeps_them_up_to_its_sqlstate(message, line):
    assert one_line(AnalysisException(message)) == line
    assert "\n" not in one_line(AnalysisException(message))


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (ValueError("bad value"), "ValueError: bad value"),
        (RuntimeError("first line\nsecond line\nthird"), "RuntimeError: first line"),
        (OSError("  padded  \n"), "OSError: padded"),
        (KeyError("missing"), "KeyError: 'missing'"),
    ],
)
def test_other_errors_get_their_type_name_and_first_line(error, line):
    assert one_line(error) == line


@pytest.mark.parametrize(("error", "line"), [(ValueError(), "ValueError"), (RuntimeError("  \n "), "RuntimeError")])
def test_an_empty_message_gives_the_type_name(error, line):
    assert one_line(error) == line


@pytest.mark.parametrize(
    "error",
    [SpecError("sql job: no statements given: pass at least one SQL statement"), JobError("statement 2/3 failed: x")],
)
def test_the_providers_own_one_line_errors_pass_through_without_a_type_name(error):
    assert one_line(error) == str(error)


class Py4JJavaError(Exception):
    """Stands in for py4j.protocol.Py4JJavaError, whose message names the call, then gives the Java exception."""

    def __init__(self, target: str, java_error: str) -> None:
        super().__init__(f"An error occurred while calling {target}.\n: {java_error}")


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            Py4JJavaError(
                "o123.sql",
                "org.apache.spark.SparkException: Job aborted due to stage failure: task 0 lost\n"
                "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)\n"
                "\tat scala.collection.immutable.List.foreach(List.scala:334)\n",
            ),
            "Py4JJavaError: org.apache.spark.SparkException: Job aborted due to stage failure: task 0 lost",
        ),
        (
            Py4JJavaError("o45.insertInto", "java.io.IOException: No space left on device\n\tat java.io.File.x"),
            "Py4JJavaError: java.io.IOException: No space left on device",
        ),
    ],
)
def test_a_py4j_error_gives_the_java_exception_line_not_the_call(error, line):
    assert one_line(error) == line
    assert "An error occurred while calling" not in one_line(error)


def test_a_java_exception_carrying_a_spark_error_class_gives_the_error_class_up_to_its_sqlstate():
    """As Spark 4.2's JDBC reader fails on a lookup table that does not exist (its words, its Java stack cut)."""
    error = Py4JJavaError(
        "o47.load",
        "org.apache.spark.SparkException: [JDBC_EXTERNAL_ENGINE_SYNTAX_ERROR.DURING_OUTPUT_SCHEMA_RESOLUTION] JDBC "
        'external engine syntax error. The error was caused by the query SELECT * FROM "public"."dim" WHERE 1=0. '
        'ERROR: relation "public.dim" does not exist\n  Position: 15. The error occurred during output schema '
        "resolution. SQLSTATE: 42000\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.x(Errors.scala:1)\n",
    )

    assert one_line(error) == (
        "[JDBC_EXTERNAL_ENGINE_SYNTAX_ERROR.DURING_OUTPUT_SCHEMA_RESOLUTION] JDBC external engine syntax error. The "
        'error was caused by the query SELECT * FROM "public"."dim" WHERE 1=0. ERROR: relation "public.dim" does not '
        "exist Position: 15. The error occurred during output schema resolution. SQLSTATE: 42000"
    )


def test_a_py4j_error_without_a_java_exception_line_keeps_the_call_line():
    error = Py4JJavaError("o7.collect", "")
    error.args = ("An error occurred while calling o7.collect.",)

    assert one_line(error) == "Py4JJavaError: An error occurred while calling o7.collect."


class PythonException(Exception):
    """Stands for pyspark's, whose messages these are (as a classic session and a Spark Connect one give them)."""


@pytest.mark.parametrize(
    "message",
    [
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "/jobs/lookup.py", line 4, in probe\n    import spark_tables\n'
        "ModuleNotFoundError: No module named 'spark_tables'\n",
        "\n  An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback (most recent call last):\n"
        '  File "/jobs/lookup.py", line 4, in probe\n    import spark_tables\n'
        "ModuleNotFoundError: No module named 'spark_tables'\n SQLSTATE: 38000\n",
    ],
)
def test_an_error_of_sparks_python_workers_gives_what_its_traceback_raised(message):
    assert one_line(PythonException(message)) == "PythonException: ModuleNotFoundError: No module named 'spark_tables'"


def test_an_error_of_sparks_python_workers_gives_the_last_of_chained_exceptions():
    message = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        "KeyError: 'id'\n\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\nspark_tables.core.errors.JobError: lookup customers: no key column id\n"
    )
    assert one_line(PythonException(message)) == (
        "PythonException: spark_tables.core.errors.JobError: lookup customers: no key column id"
    )


def test_a_streaming_querys_failure_gives_what_ended_it() -> None:
    error = StreamingQueryException(
        "[STREAM_FAILED] Query [id = 6b3e, runId = 4f98] terminated with exception: [DIVIDE_BY_ZERO] Division by "
        "zero. SQLSTATE: 22012\n== SQL ==\nSELECT 1/0"
    )
    assert one_line(error) == "[DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012"


def test_a_foreach_batch_functions_failure_gives_the_spark_error_its_traceback_raised() -> None:
    """As Spark 4.2 words a plan's sink query whose micro-batch divided by zero (the traceback shortened)."""
    error = StreamingQueryException(
        "[STREAM_FAILED] Query [id = 6b3e, runId = 4f98] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR]"
        " An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by "
        "the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "/jobs/streaming/sinks/writer.py", line 179, in write_counted\n    self._write_batch(batch, batch_id)\n'
        "pyspark.errors.exceptions.captured.ArithmeticException: [DIVIDE_BY_ZERO] Division by zero. Use `try_divide` "
        "to tolerate divisor being 0 and return NULL instead. SQLSTATE: 22012\n== SQL (line 1, position 1) ==\n"
        "`amount` DIV (`amount` - 10) AS `__arg0`\n\n SQLSTATE: 39000 SQLSTATE: XXKST\n=== Streaming Query ===\n"
        "Identifier: plan_sink_5 [id = 6b3e, runId = 4f98]\nCurrent Committed Offsets: {}\n"
    )
    assert one_line(error) == (
        "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and return NULL instead. "
        "SQLSTATE: 22012"
    )


def test_a_foreach_batch_functions_own_error_keeps_its_type() -> None:
    error = StreamingQueryException(
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An "
        'error occurred. Return Message: Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
        'psycopg.errors.UndefinedTable: relation "s.t" does not exist\n'
    )
    assert one_line(error) == 'StreamingQueryException: psycopg.errors.UndefinedTable: relation "s.t" does not exist'


class StreamingQueryException(Exception):
    """Stands in for pyspark's: only its message matters here."""
