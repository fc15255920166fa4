"""Reads a ``CREATE TABLE ... AS SELECT`` statement into the fields of a CTAS job, without running anything."""

from __future__ import annotations

import re
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.identifiers import IDENTIFIER_PATTERN
from spark_tables.core.row_source import QUERY_START
from spark_tables.core.statements import strip_final_semicolon, strip_leading_comments

#: A string literal; atomic, so that a doubled quote is never re-read as two literals (no runaway backtracking).
_STRING = r"(?>'(?:[^'\\]|\\.|'')*')"
_HEAD = re.compile(
    rf"(?P<verb>CREATE\s+OR\s+REPLACE\s+TABLE|CREATE\s+TABLE|REPLACE\s+TABLE)\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?"
    rf"(?P<name>{IDENTIFIER_PATTERN})(?=\s|\()",
    re.IGNORECASE,
)
_CLAUSES = {
    "format": re.compile(r"USING\s+(?P<value>[A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE),
    "partitioned_by": re.compile(r"PARTITIONED\s+BY\s*\((?P<value>[^)]*)\)", re.IGNORECASE),
    "location": re.compile(rf"LOCATION\s+(?P<value>{_STRING})", re.IGNORECASE),
    "comment": re.compile(rf"COMMENT\s+(?P<value>{_STRING})", re.IGNORECASE),
    "properties": re.compile(r"TBLPROPERTIES\s*\((?P<value>(?:[^)']|" + _STRING + r")*)\)", re.IGNORECASE),
}
_AS = re.compile(r"AS\s+", re.IGNORECASE)
#: What ``is_ctas`` reads after the name: strings, quoted names and comments (skipped whole, whatever words they
#: hold), parentheses (a column list, OPTIONS), and AS followed by a query.
_TOKEN = re.compile(
    rf"{_STRING}|\"(?:[^\"\\]|\\.)*\"|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/|(?P<open>\()|(?P<close>\))"
    rf"|(?P<query>\bAS\s*(?={QUERY_START.pattern}))",
    re.IGNORECASE | re.DOTALL,
)
_COLUMN = re.compile(r"\s*(?P<name>`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s*(?:,|\Z)")
#: Spark's escapes in string literals (besides \uXXXX and octal \NNN); ``\%`` and ``\_`` keep their backslash
#: (they are LIKE patterns' escapes); any other escaped character stands for itself.
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "0": "\0", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_ESCAPE = re.compile(r"''|\\(u[0-9a-fA-F]{4}|[0-3][0-7]{2}|.)", re.DOTALL)
_PROPERTY = re.compile(
    rf"\s*(?P<key>{_STRING}|[A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*(?P<value>{_STRING})\s*(?:,|\Z)", re.DOTALL
)


def is_ctas(statement: str) -> bool:
    """Whether a statement creates or replaces a table from a query (``CREATE [OR REPLACE] TABLE ... AS query``,
    ``REPLACE TABLE ... AS query``), whatever its clauses: ``parse_ctas`` says whether it can read them."""
    body = strip_leading_comments(statement)
    head = _HEAD.match(body)
    if head is None:
        return False
    depth = 0
    for token in _TOKEN.finditer(body, head.end()):
        if token.group("open"):
            depth += 1
        elif token.group("close"):
            depth -= 1
        elif token.group("query") and depth == 0:
            return True
    return False


def parse_ctas(statement: str) -> dict[str, Any]:
    """The CTAS job fields a statement gives: table, query, format, partitioned_by, properties, location,
    comment, if_not_exists and replace. ``CREATE OR REPLACE`` and ``REPLACE`` both mean replace if it exists."""
    if not isinstance(statement, str):
        raise SpecError(f"sql must be one CREATE TABLE ... AS SELECT statement, not {type(statement).__name__}")
    body = strip_final_semicolon(strip_leading_comments(statement))
    head = _HEAD.match(body)
    if head is None:
        raise SpecError(
            "sql is not a CTAS statement: write CREATE TABLE [IF NOT EXISTS] name [USING format] "
            "[PARTITIONED BY (columns)] [LOCATION 'path'] [COMMENT '...'] [TBLPROPERTIES (...)] AS SELECT ..."
        )
    fields: dict[str, Any] = {
        "table": head.group("name"),
        "if_not_exists": head.group("ine") is not None,
        "replace": "REPLACE" in head.group("verb").upper(),
    }
    rest = body[head.end() :].lstrip()
    while not _AS.match(rest):
        clause, match = _next_clause(rest)
        if clause in fields:
            raise SpecError(f"CTAS statement gives {clause.replace('_', ' ')} twice: give it once")
        fields[clause] = _clause_value(clause, match.group("value"))
        rest = rest[match.end() :].lstrip()
    fields["query"] = rest[_AS.match(rest).end() :]
    return fields


def _next_clause(rest: str) -> tuple[str, re.Match[str]]:
    for clause, pattern in _CLAUSES.items():
        match = pattern.match(rest)
        if match:
            return clause, match
    shown = " ".join(rest.split()[:3]) or "the end of the statement"
    raise SpecError(
        f"CTAS statement: unexpected {shown!r} before AS: use only USING, PARTITIONED BY (columns), LOCATION, "
        "COMMENT and TBLPROPERTIES, then AS followed by the query"
    )


def _clause_value(clause: str, text: str) -> Any:
    if clause == "partitioned_by":
        return partition_columns(text)
    if clause == "properties":
        return _properties(text)
    if clause in ("location", "comment"):
        return _unquote(text)
    return text


def partition_columns(text: str) -> list[str]:
    if text.strip().endswith(","):
        raise SpecError(f"CTAS statement: PARTITIONED BY ({text.strip()}) is invalid: list column names")
    columns: list[str] = []
    position = 0
    while position < len(text.rstrip()):
        match = _COLUMN.match(text, position)
        if match is None:
            raise SpecError(f"CTAS statement: PARTITIONED BY ({text.strip()}) is invalid: list column names")
        name = match.group("name")
        columns.append(name[1:-1].replace("``", "`") if name.startswith("`") else name)
        position = match.end()
    if not columns:
        raise SpecError("CTAS statement: PARTITIONED BY () names no column: list the columns")
    return columns


def _properties(text: str) -> dict[str, str]:
    if text.strip().endswith(","):
        raise SpecError(f"CTAS statement: TBLPROPERTIES ({text.strip()}) is invalid: write ('key' = 'value', ...)")
    properties: dict[str, str] = {}
    position = 0
    while position < len(text.strip()):
        match = _PROPERTY.match(text, position)
        if match is None:
            raise SpecError(f"CTAS statement: TBLPROPERTIES ({text.strip()}) is invalid: write ('key' = 'value', ...)")
        key = match.group("key")
        properties[_unquote(key) if key.startswith("'") else key] = _unquote(match.group("value"))
        position = match.end()
    return properties


def _unquote(literal: str) -> str:
    def unescape(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped is None:
            return "'"
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        if len(escaped) == 3:
            return chr(int(escaped, 8))
        return _ESCAPES.get(escaped, escaped)

    return _ESCAPE.sub(unescape, literal[1:-1])
