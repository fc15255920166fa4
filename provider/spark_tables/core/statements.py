"""What a Spark SQL statement does to tables, read from its text without running it."""

from __future__ import annotations

import re

from spark_tables.core.identifiers import IDENTIFIER_PATTERN, TableIdentifier

_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
#: The words before the name of the table a statement writes.
_WRITE_VERB = re.compile(
    r"(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:EXTERNAL\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?|REPLACE\s+TABLE\s+"
    r"|INSERT\s+(?:INTO|OVERWRITE)\s+(?:TABLE\s+)?|MERGE\s+INTO\s+|UPDATE\s+|DELETE\s+FROM\s+)",
    re.IGNORECASE,
)
_DIRECTORY = re.compile(r"(?:LOCAL\s+)?DIRECTORY\b", re.IGNORECASE)
#: A table name, followed by white space, a column list or partition spec, or the end.
_NAME = re.compile(rf"{IDENTIFIER_PATTERN}(?=\s|\(|;|\Z)")


#: A statement's final semicolon, with the white space and line comments after it.
_FINAL_SEMICOLON = re.compile(r";\s*(?:--[^\n]*(?:\n\s*|\Z))*\Z")


def strip_leading_comments(statement: str) -> str:
    return _LEADING_COMMENTS.sub("", statement, count=1)


def strip_final_semicolon(statement: str) -> str:
    """The statement without a final ``;`` (and line comments after it), so that it can be nested."""
    return _FINAL_SEMICOLON.sub("", statement.rstrip()).rstrip()


def written_table(statement: str) -> TableIdentifier | None:
    """The table a statement creates or writes rows into, or None for queries and other commands.

    Raises ``SpecError`` when the statement writes a table whose name is not a valid identifier.
    """
    body = strip_leading_comments(statement)
    verb = _WRITE_VERB.match(body)
    if verb is None:
        return None
    rest = body[verb.end() :]
    if _DIRECTORY.match(rest):
        return None
    name = _NAME.match(rest)
    return TableIdentifier.parse(name.group(0) if name else (rest.split() or [""])[0])


def summary(statement: str, width: int = 80) -> str:
    """The statement on one line, cut to ``width`` characters, for logs."""
    flat = " ".join(strip_leading_comments(statement).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
