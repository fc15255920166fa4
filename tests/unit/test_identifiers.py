from __future__ import annotations

import pytest

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import TableIdentifier


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("orders", ("orders",)),
        ("sales.orders", ("sales", "orders")),
        ("spark_catalog.sales.orders", ("spark_catalog", "sales", "orders")),
        ("1st_table", ("1st_table",)),
        ("`my table`", ("my table",)),
        ("`a.b`", ("a.b",)),
        ("`a``b`", ("a`b",)),
        ("````", ("`",)),
        ("`sales`.orders", ("sales", "orders")),
        ("`x`.`y``z`.`w w`", ("x", "y`z", "w w")),
        ("sales . orders", ("sales", "orders")),
        ("  sales.orders  ", ("sales", "orders")),
        ("cat .\tdb. t", ("cat", "db", "t")),
    ],
)
def test_parse_splits_into_unquoted_parts(text, parts):
    assert TableIdentifier.parse(text).parts == parts


def test_table_and_database_are_the_last_two_parts():
    identifier = TableIdentifier.parse("cat.db.t")

    assert (identifier.database, identifier.table) == ("db", "t")


def test_database_is_none_for_a_single_part():
    assert TableIdentifier.parse("t").database is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "a-b",
        "a b",
        "a..b",
        ".a",
        "a.",
        "a.b.c.d",
        "``",
        "```",
        "`a`b`",
        "`unterminated",
        "é",
        "a;b",
        "`a\nb`",
        "`a\rb`",
        "`a\tb`",
        "`a\0b`",
    ],
)
def test_parse_rejects_invalid_text_with_a_one_line_message(text):
    with pytest.raises(SpecError) as caught:
        TableIdentifier.parse(text)

    message = str(caught.value)
    assert message.startswith("invalid table identifier")
    assert "\n" not in message and "\r" not in message


@pytest.mark.parametrize("value", [None, 42, ["a"], b"a"])
def test_parse_rejects_non_strings(value):
    with pytest.raises(SpecError, match="invalid table identifier"):
        TableIdentifier.parse(value)


def test_parse_names_the_control_character_problem():
    with pytest.raises(SpecError, match="control character"):
        TableIdentifier.parse("db.`a\tb`")


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("t", "`t`"),
        ("db.t", "`db`.`t`"),
        ("cat.db.t", "`cat`.`db`.`t`"),
        ("`a``b`", "`a``b`"),
        ("`my table`.t", "`my table`.`t`"),
    ],
)
def test_quoted_puts_every_part_in_backticks(text, quoted):
    assert TableIdentifier.parse(text).quoted() == quoted


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("db . t", "db.t"),
        ("`db`.`t`", "db.t"),
        ("`my table`.t", "`my table`.t"),
        ("`a``b`", "`a``b`"),
        ("`a.b`", "`a.b`"),
    ],
)
def test_str_quotes_only_the_parts_that_need_it(text, shown):
    assert str(TableIdentifier.parse(text)) == shown


@pytest.mark.parametrize("text", ["t", "db.t", "`my table`.`a``b`", "c.`d.e`.f", "````"])
def test_str_and_quoted_parse_back_to_the_same_identifier(text):
    identifier = TableIdentifier.parse(text)

    assert TableIdentifier.parse(str(identifier)) == identifier
    assert TableIdentifier.parse(identifier.quoted()) == identifier
