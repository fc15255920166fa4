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
