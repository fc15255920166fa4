"""The SQL reader: scripts split into statements, the table a statement writes, and what each statement is."""

from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier
from spark_tables.core.plan.statements import shown
from spark_tables.tasks.sql_reader import read_statement, read_statements, split_script


def written_table(statement: str) -> TableIdentifier | None:
    """The table ``read_statement`` finds ``statement`` writes."""
    writes = read_statement(statement).writes
    return None if writes is None else TableIdentifier.parse(writes)


def summary(statement: str, width: int = 80) -> str:
    return read_statement(statement).summary if width == 80 else shown(statement, width)


@pytest.mark.parametrize(
    ("statement", "parts"),
    [
        ("CREATE TABLE t (a INT) USING parquet", ("t",)),
        ("CREATE TABLE t(a INT)", ("t",)),
        ("CREATE TABLE t;", ("t",)),
        ("CREATE TABLE db.t AS SELECT 1", ("db", "t")),
        ("CREATE TABLE IF NOT EXISTS db.t (a INT)", ("db", "t")),
        ("CREATE OR REPLACE TABLE t USING parquet AS SELECT 1", ("t",)),
        ("REPLACE TABLE t USING parquet AS SELECT 1", ("t",)),
        ("CREATE EXTERNAL TABLE t (a INT) LOCATION '/data/t'", ("t",)),
        ("INSERT INTO t SELECT 1", ("t",)),
        ("INSERT INTO TABLE t SELECT 1", ("t",)),
        ("INSERT INTO t(a, b) VALUES (1, 2)", ("t",)),
        ("INSERT INTO t\tVALUES (1)", ("t",)),
        ("INSERT OVERWRITE t PARTITION (ds = '2026-01-01') SELECT 1", ("t",)),
        ("INSERT OVERWRITE TABLE db.t PARTITION (ds='x') SELECT 1", ("db", "t")),
        ("INSERT INTO directory_log SELECT 1", ("directory_log",)),
        ("MERGE INTO db.t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", ("db", "t")),
        ("UPDATE t SET a = 1", ("t",)),
        ("DELETE FROM db . t WHERE a = 1", ("db", "t")),
        ("CREATE TABLE cat.db.t (a INT)", ("cat", "db", "t")),
    ],
)
def test_written_table_of_writing_statements(statement, parts):
    assert written_table(statement).parts == parts


@pytest.mark.parametrize(
    "statement",
    [
        "create table if not exists DB.T (a int)",
        "Insert Overwrite Table DB.T partition (ds='x') select 1",
        "merge into DB.T using s on true when matched then delete",
        "delete from DB.T",
    ],
)
def test_written_table_ignores_keyword_case_and_keeps_name_case(statement):
    assert written_table(statement).parts == ("DB", "T")


@pytest.mark.parametrize(
    ("statement", "parts"),
    [
        ("-- load the day\nINSERT INTO t SELECT 1", ("t",)),
        ("/* header\n spanning lines */ INSERT INTO t SELECT 1", ("t",)),
        ("  \n-- one\n/* two */\n  -- three\nCREATE TABLE db.t (a INT)", ("db", "t")),
    ],
)
def test_written_table_skips_leading_comments(statement, parts):
    assert written_table(statement).parts == parts


@pytest.mark.parametrize(
    ("statement", "parts"),
    [
        ("CREATE TABLE `my table` (a INT)", ("my table",)),
        ("CREATE TABLE `x`(a INT)", ("x",)),
        ("INSERT INTO `db`.`a``b` SELECT 1", ("db", "a`b")),
        ("MERGE INTO `a.b`.t USING s ON true WHEN MATCHED THEN DELETE", ("a.b", "t")),
    ],
)
def test_written_table_reads_backticked_names(statement, parts):
    assert written_table(statement).parts == parts


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM t",
        "  -- comment\nSELECT 1",
        "CREATE DATABASE IF NOT EXISTS demo",
        "CREATE TEMPORARY VIEW v AS SELECT 1",
        "CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1",
        "CREATE VIEW v AS SELECT 1",
        "INSERT OVERWRITE DIRECTORY '/tmp/out' USING parquet SELECT 1",
        "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/out' SELECT 1",
        "insert overwrite local directory '/tmp/out' select 1",
        "DROP TABLE t",
        "SHOW TABLES",
    ],
)
def test_written_table_is_none_for_statements_that_write_no_table(statement):
    assert written_table(statement) is None


def test_an_empty_statement_is_refused():
    with pytest.raises(SpecError, match=r"^is empty: remove it or give its SQL text$"):
        read_statement("")


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO my-table SELECT 1",
        "CREATE TABLE t-1 (a INT)",
        "CREATE TABLE a.b.c.d (x INT)",
        "INSERT INTO `unterminated SELECT 1",
    ],
)
def test_written_table_rejects_an_invalid_name_on_one_line(statement):
    with pytest.raises(SpecError, match="invalid table identifier") as caught:
        written_table(statement)

    assert "\n" not in str(caught.value)


def test_the_summary_keeps_comments_after_the_first_token():
    assert summary("-- a\nSELECT 1 -- b") == "SELECT 1 -- b"


def test_summary_flattens_white_space_and_drops_leading_comments():
    assert summary("-- header\n  SELECT a,\n\tb\n  FROM t  ") == "SELECT a, b FROM t"


def test_summary_keeps_a_short_statement_whole():
    assert summary("SELECT 1", width=8) == "SELECT 1"


def test_summary_cuts_a_long_statement_to_width_with_an_ellipsis():
    cut = summary("SELECT " + ", ".join(f"column_{i}" for i in range(50)), width=30)

    assert len(cut) == 30
    assert cut.endswith("…")
    assert cut.startswith("SELECT column_0, column_1")


@pytest.mark.parametrize(
    ("script", "statements"),
    [
        ("SELECT 1; SELECT 2;", ["SELECT 1", "SELECT 2"]),
        ("SELECT 'a;b' AS v; SELECT \"c;d\"", ["SELECT 'a;b' AS v", 'SELECT "c;d"']),
        ("SELECT `a;b` FROM t; SELECT 2", ["SELECT `a;b` FROM t", "SELECT 2"]),
        ("SELECT 1 -- one; two\n; SELECT 2", ["SELECT 1 -- one; two", "SELECT 2"]),
        ("SELECT 1 /* one;\n two */; SELECT 2", ["SELECT 1 /* one;\n two */", "SELECT 2"]),
        ("-- header\nSELECT 1;\n-- trailing comment\n;;", ["-- header\nSELECT 1"]),
        ("SELECT 'it''s; here', '\\'; x'; SELECT 2", ["SELECT 'it''s; here', '\\'; x'", "SELECT 2"]),
        # Jinja rendered: the ds and a rendered macro's text are plain SQL by then
        (
            "INSERT INTO t SELECT * FROM s WHERE ds = '2026-01-01'; SELECT '{{ not rendered; }}'",
            ["INSERT INTO t SELECT * FROM s WHERE ds = '2026-01-01'", "SELECT '{{ not rendered; }}'"],
        ),
        ("SELECT 1; SELECT 'unclosed; quote", ["SELECT 1", "SELECT 'unclosed; quote"]),
        ("", []),
        ("  -- only a comment\n /* and another */ ", []),
    ],
)
def test_a_script_is_split_on_semicolons_outside_strings_and_comments(script, statements):
    assert split_script(script) == statements


def test_a_statement_of_comments_only_is_empty_by_number():
    with pytest.raises(SpecError, match="sql job: statement 2 is empty") as caught:
        read_statements(["SELECT 1", "/* nothing */ -- here"])
    assert "\n" not in str(caught.value)


def test_a_statement_sqlglot_cannot_parse_is_still_read_for_what_the_provider_needs():
    # sqlglot's parser refuses these; Spark runs them, and the reader reads only their heads.
    assert written_table("REPLACE TABLE db.t USING parquet AS SELECT 1").parts == ("db", "t")
    assert written_table("INSERT OVERWRITE DIRECTORY '/tmp/out' USING parquet SELECT 1") is None
    assert read_statement("CREATE TABLE t TBLPROPERTIES ('k' 'v') AS SELECT 1").ctas.properties == {"k": "v"}
    assert read_statement("SHOW TBLPROPERTIES t").writes is None
