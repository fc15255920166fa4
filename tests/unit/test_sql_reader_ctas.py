"""The SQL reader's CTAS statements: the CTAS job fields a ``CREATE TABLE ... AS SELECT`` statement gives (read_ctas),
and its one-line errors; is_ctas: which statements of a SQL job are CTAS statements."""

from __future__ import annotations

from typing import Any

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.tasks.sql_reader import read_ctas, read_statement


def parse_ctas(statement: Any) -> dict[str, Any]:
    return read_ctas(statement).job_fields()


def _error_message(statement) -> str:
    with pytest.raises(SpecError) as caught:
        parse_ctas(statement)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_bare_ctas_gives_table_query_and_flags_only():
    assert parse_ctas("CREATE TABLE db.t AS SELECT 1 AS a") == {
        "table": "db.t",
        "if_not_exists": False,
        "replace": False,
        "query": "SELECT 1 AS a",
    }


def test_every_clause_is_read():
    fields = parse_ctas(
        "CREATE TABLE cat.db.sales USING orc PARTITIONED BY (`day`, region) LOCATION '/data/sales' "
        "COMMENT 'daily sales' TBLPROPERTIES ('owner.team' = 'finance', retention.days = '30') "
        "AS SELECT * FROM raw"
    )

    assert fields == {
        "table": "cat.db.sales",
        "if_not_exists": False,
        "replace": False,
        "format": "orc",
        "partitioned_by": ["day", "region"],
        "location": "/data/sales",
        "comment": "daily sales",
        "properties": {"owner.team": "finance", "retention.days": "30"},
        "query": "SELECT * FROM raw",
    }


def test_clauses_may_come_in_any_order():
    in_order = parse_ctas(
        "CREATE TABLE t USING json PARTITIONED BY (a) LOCATION '/x' COMMENT 'c' TBLPROPERTIES ('k' = 'v') AS SELECT 1"
    )
    reversed_order = parse_ctas(
        "CREATE TABLE t TBLPROPERTIES ('k' = 'v') COMMENT 'c' LOCATION '/x' PARTITIONED BY (a) USING json AS SELECT 1"
    )

    assert reversed_order == in_order


def test_keywords_are_case_insensitive_and_the_format_keeps_its_spelling():
    fields = parse_ctas("create table t using PARQUET partitioned by (a) as select 1")

    assert fields["format"] == "PARQUET"
    assert fields["partitioned_by"] == ["a"]
    assert fields["query"] == "select 1"


def test_clauses_may_touch_their_parentheses_and_quotes():
    fields = parse_ctas("CREATE TABLE t PARTITIONED BY(a)TBLPROPERTIES('k'='v')COMMENT 'c'AS SELECT 1")

    assert fields["partitioned_by"] == ["a"]
    assert fields["properties"] == {"k": "v"}
    assert fields["comment"] == "c"


def test_partition_columns_lose_their_backticks_and_spaces():
    assert parse_ctas("CREATE TABLE t PARTITIONED BY ( `a` ,b , `c`) AS SELECT 1")["partitioned_by"] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("literal", "text"),
    [
        ("'it''s'", "it's"),
        (r"'it\'s'", "it's"),
        (r"'a \\ b'", "a \\ b"),
        ("'AS SELECT 2'", "AS SELECT 2"),
        ("''", ""),
    ],
)
def test_comment_and_location_are_unquoted(literal, text):
    fields = parse_ctas(f"CREATE TABLE t LOCATION {literal} COMMENT {literal} AS SELECT 1")

    assert fields["comment"] == text
    assert fields["location"] == text


def test_property_keys_may_be_quoted_or_dotted_words():
    fields = parse_ctas(
        "CREATE TABLE t TBLPROPERTIES ('quoted key' = 'a', dotted.key_1 = 'b', plain='c', 'no equals' 'd') AS SELECT 1"
    )

    assert fields["properties"] == {"quoted key": "a", "dotted.key_1": "b", "plain": "c", "no equals": "d"}


def test_property_values_are_unquoted_and_may_hold_parentheses_and_commas():
    fields = parse_ctas(
        r"CREATE TABLE t TBLPROPERTIES ('note' = 'it''s (x, y)', 'other' = 'don\'t', 'k)' = ')') AS SELECT 1"
    )

    assert fields["properties"] == {"note": "it's (x, y)", "other": "don't", "k)": ")"}


def test_properties_may_span_lines():
    fields = parse_ctas("CREATE TABLE t TBLPROPERTIES (\n  'a' = 'b',\n  'c' = 'd'\n) AS SELECT 1")

    assert fields["properties"] == {"a": "b", "c": "d"}


def test_empty_properties_give_an_empty_mapping():
    assert parse_ctas("CREATE TABLE t TBLPROPERTIES () AS SELECT 1")["properties"] == {}


def test_if_not_exists_is_read():
    fields = parse_ctas("CREATE TABLE IF NOT EXISTS db.t AS SELECT 1")

    assert fields["table"] == "db.t"
    assert fields["if_not_exists"] is True
    assert fields["replace"] is False


@pytest.mark.parametrize(
    "statement",
    ["CREATE OR REPLACE TABLE t AS SELECT 1", "REPLACE TABLE t AS SELECT 1", "create  or\nreplace table t as select 1"],
)
def test_create_or_replace_and_replace_both_mean_replace(statement):
    fields = parse_ctas(statement)

    assert fields["replace"] is True
    assert fields["if_not_exists"] is False
    assert fields["table"] == "t"


def test_leading_comments_and_a_trailing_semicolon_are_ignored():
    fields = parse_ctas("-- build the table\n/* nightly\n job */\n  CREATE TABLE t USING parquet AS SELECT 1 ;\n")

    assert fields["table"] == "t"
    assert fields["query"] == "SELECT 1"


def test_the_query_keeps_its_own_text_including_a_with_clause():
    query = "WITH x AS (SELECT 1 AS a)\nSELECT a, ';' AS s FROM x"

    assert parse_ctas(f"CREATE TABLE t USING parquet AS {query}")["query"] == query


def test_the_query_may_start_on_the_next_line():
    assert parse_ctas("CREATE TABLE t\nAS\nSELECT 1")["query"] == "SELECT 1"


def test_a_backticked_table_name_is_kept_as_written():
    assert parse_ctas("CREATE TABLE `my db`.`t` AS SELECT 1")["table"] == "`my db`.`t`"


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT 1",
        "INSERT INTO t SELECT 1",
        "CREATE VIEW v AS SELECT 1",
        "CREATE EXTERNAL TABLE t AS SELECT 1",
        "CREATE TABLE",
        "",
        "-- only a comment",
    ],
)
def test_a_statement_that_is_not_a_ctas_is_rejected(statement):
    assert "not a CTAS statement" in _error_message(statement)


def test_sql_that_is_not_text_is_rejected():
    assert "not NoneType" in _error_message(None)


@pytest.mark.parametrize(
    ("statement", "shown"),
    [
        ("CREATE TABLE t OPTIONS (path '/x') AS SELECT 1", "OPTIONS"),
        ("CREATE TABLE t CLUSTERED BY (a) INTO 4 BUCKETS AS SELECT 1", "CLUSTERED BY"),
        ("CREATE TABLE t (a INT) AS SELECT 1", "(a INT)"),
    ],
)
def test_an_unknown_clause_is_named(statement, shown):
    message = _error_message(statement)

    assert shown in message
    assert "use only USING, PARTITIONED BY" in message


def test_comments_between_the_clauses_are_skipped_as_spark_skips_them():
    # The regex lexer refused this ("unexpected '-- note' before AS"); the tokenizer reads comments as Spark does.
    fields = parse_ctas("CREATE TABLE t -- note\nUSING parquet /* kept? no */ AS SELECT 1")

    assert (fields["table"], fields["format"], fields["query"]) == ("t", "parquet", "SELECT 1")


def test_a_ctas_without_as_is_rejected():
    message = _error_message("CREATE TABLE t USING parquet")

    assert "the end of the statement" in message
    assert "AS followed by the query" in message


@pytest.mark.parametrize(
    ("clause", "name"),
    [
        ("USING orc USING parquet", "format"),
        ("PARTITIONED BY (a) PARTITIONED BY (b)", "partitioned by"),
        ("LOCATION '/a' LOCATION '/b'", "location"),
        ("COMMENT 'a' COMMENT 'b'", "comment"),
        ("TBLPROPERTIES ('a' = 'b') TBLPROPERTIES ('c' = 'd')", "properties"),
    ],
)
def test_a_clause_given_twice_is_rejected(clause, name):
    assert f"gives {name} twice" in _error_message(f"CREATE TABLE t {clause} AS SELECT 1")


@pytest.mark.parametrize(
    "properties",
    ["(a)", "('a')", "('a' = 'b' 'c' = 'd')", "(a = 1)", "('a' = b)", "(= 'b')"],
)
def test_invalid_tblproperties_are_rejected(properties):
    message = _error_message(f"CREATE TABLE t TBLPROPERTIES {properties} AS SELECT 1")

    assert "TBLPROPERTIES" in message
    assert "is invalid" in message


def test_a_backticked_partition_column_may_hold_a_comma_or_a_doubled_backtick():
    fields = parse_ctas("CREATE TABLE t PARTITIONED BY (`a,b`, c, `x``y`) AS SELECT 1")

    assert fields["partitioned_by"] == ["a,b", "c", "x`y"]


@pytest.mark.parametrize("columns", ["()", "( )", "(\n)"])
def test_a_partition_list_without_columns_is_rejected(columns):
    message = _error_message(f"CREATE TABLE t PARTITIONED BY {columns} AS SELECT 1")

    assert "PARTITIONED BY () names no column" in message


@pytest.mark.parametrize("columns", ["a,,b", ",a", "``", "a b", "`a`b", "a-b", "1a", "'a'", "`a"])
def test_an_invalid_partition_list_is_rejected_and_shown(columns):
    message = _error_message(f"CREATE TABLE t PARTITIONED BY ({columns}) AS SELECT 1")

    assert f"PARTITIONED BY ({columns}) is invalid: list column names" in message


@pytest.mark.parametrize("columns", ["(a,)", "(a, )", "(a, b ,)"])
def test_a_trailing_comma_in_the_partition_list_is_rejected(columns):
    assert "is invalid: list column names" in _error_message(f"CREATE TABLE t PARTITIONED BY {columns} AS SELECT 1")


@pytest.mark.parametrize("properties", ["('k' = 'v',)", "('k' = 'v', )", "('a' = 'b', 'c' = 'd' ,)"])
def test_a_trailing_comma_in_tblproperties_is_rejected(properties):
    message = _error_message(f"CREATE TABLE t TBLPROPERTIES {properties} AS SELECT 1")

    assert "TBLPROPERTIES" in message and "is invalid" in message


@pytest.mark.parametrize(
    ("escaped", "text"),
    [
        (r"\n", "\n"),
        (r"\t", "\t"),
        (r"\r", "\r"),
        (r"\b", "\b"),
        (r"\0", "\0"),
        (r"\Z", "\x1a"),
        (r"\\", "\\"),
        (r"\'", "'"),
        (r"\"", '"'),
        (r"\q", "q"),
        ("''", "'"),
    ],
)
def test_escapes_in_literals_mean_what_they_mean_to_spark(escaped, text):
    fields = parse_ctas(
        f"CREATE TABLE t LOCATION '/a{escaped}b' COMMENT 'a{escaped}b' TBLPROPERTIES ('k{escaped}' = 'a{escaped}b') "
        "AS SELECT 1"
    )

    assert fields["comment"] == f"a{text}b"
    assert fields["location"] == f"/a{text}b"
    assert fields["properties"] == {f"k{text}": f"a{text}b"}


def test_an_escaped_backslash_does_not_escape_what_follows():
    assert parse_ctas(r"CREATE TABLE t COMMENT 'a\\nb' AS SELECT 1")["comment"] == "a\\nb"


def test_escapes_are_decoded_once_and_left_to_right():
    assert parse_ctas(r"CREATE TABLE t COMMENT '\\n\n''\'' AS SELECT 1")["comment"] == "\\n\n''"


@pytest.mark.parametrize(("escaped", "text"), [(r"\u00e9", "\u00e9"), (r"\101", "A"), (r"\%", "\\%"), (r"\_", "\\_")])
def test_unicode_octal_and_like_escapes_mean_what_they_mean_to_spark(escaped, text):
    assert parse_ctas(f"CREATE TABLE t COMMENT 'a{escaped}b' AS SELECT 1")["comment"] == f"a{text}b"


def test_an_unclosed_literal_of_many_doubled_quotes_fails_without_runaway_backtracking():
    # Without atomic string literals this takes hours: each '' may be one escaped quote or two literals.
    statement = "CREATE TABLE t TBLPROPERTIES ('k' = '" + "it''s " * 30 + "AS SELECT 1"

    assert "TBLPROPERTIES" in _error_message(statement)


CTAS_STATEMENTS = {
    "bare": "CREATE TABLE t AS SELECT 1",
    "clauses": "create table db.t using parquet partitioned by (k) as select 1 AS a, 2 AS k",
    "if-not-exists": "CREATE TABLE IF NOT EXISTS t AS WITH x AS (SELECT 1 AS a) SELECT * FROM x",
    "or-replace": "CREATE OR REPLACE TABLE t AS VALUES (1)",
    "replace": "REPLACE TABLE t AS TABLE s",
    "parenthesised-query": "CREATE TABLE t AS (SELECT 1)",
    "comments": "-- daily\nCREATE TABLE t /* as select */ COMMENT 'as select' AS\n  SELECT 1",
}
#: CTAS statements whose clauses the reader refuses (rather than run them as another kind of statement).
UNREADABLE_CTAS_STATEMENTS = {
    "unreadable-clause": "CREATE TABLE t USING parquet OPTIONS ('compression' 'zstd') AS SELECT 1",
    "hive-format": "CREATE TABLE t STORED AS parquet AS SELECT 1",
}
OTHER_STATEMENTS = {
    "column-list": "CREATE TABLE t (a INT, b STRING) USING parquet",
    "generated-column": "CREATE TABLE t (a INT, b INT GENERATED ALWAYS AS (a + 1)) USING parquet",
    "as-in-a-literal": "CREATE TABLE t USING parquet TBLPROPERTIES ('note' = 'AS SELECT')",
    "as-in-a-comment": "CREATE TABLE t -- AS SELECT\n (a INT)",
    "hive-format": "CREATE TABLE t (a INT) STORED AS parquet",
    "like": "CREATE TABLE t LIKE s",
    "view": "CREATE VIEW v AS SELECT 1",
    "insert": "INSERT INTO t SELECT 1",
    "query": "SELECT 'CREATE TABLE t AS SELECT 1'",
}


@pytest.mark.parametrize("statement", CTAS_STATEMENTS.values(), ids=CTAS_STATEMENTS.keys())
def test_a_statement_creating_a_table_from_a_query_is_a_ctas(statement):
    assert read_statement(statement).ctas is not None


@pytest.mark.parametrize("statement", UNREADABLE_CTAS_STATEMENTS.values(), ids=UNREADABLE_CTAS_STATEMENTS.keys())
def test_a_ctas_with_a_clause_the_reader_cannot_read_is_refused_as_a_ctas(statement):
    with pytest.raises(SpecError, match=r"^CTAS statement: unexpected .(OPTIONS|STORED) .* before AS: use only USING"):
        read_statement(statement)


@pytest.mark.parametrize("statement", OTHER_STATEMENTS.values(), ids=OTHER_STATEMENTS.keys())
def test_a_statement_without_a_query_to_fill_its_table_is_not_a_ctas(statement):
    assert read_statement(statement).ctas is None
