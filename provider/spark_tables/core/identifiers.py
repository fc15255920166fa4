"""Table identifiers and plain names (columns, declared sources and sinks): parsed, validated and quoted the way
Spark SQL reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from spark_tables.core.errors import SpecError

_UNQUOTED = re.compile(r"[A-Za-z0-9_]+")
#: A name that needs no quoting anywhere: a column, a view, a declared source or sink.
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PART = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_]+)"
#: An identifier of one to three parts as it may appear inside a SQL statement.
IDENTIFIER_PATTERN = rf"{_PART}(?:\s*\.\s*{_PART}){{0,2}}"
_WHOLE = re.compile(rf"\s*(?P<parts>{IDENTIFIER_PATTERN})\s*")
_SPLIT = re.compile(rf"({_PART})")


def checked_plain_name(name: object, what: str) -> str:
    """``name`` if it is a plain name, else one line naming ``what`` it names."""
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise SpecError(f"{what} name {name!r} is invalid: use letters, digits and underscores")
    return name


def checked_columns(value: Any, what: str, *, required: bool) -> tuple[str, ...]:
    """One column name or a sequence of them, validated: plain names, each once."""
    columns = (value,) if isinstance(value, str) else tuple(value or ())
    if required and not columns:
        raise SpecError(f"{what}: give at least one column")
    for column in columns:
        if not isinstance(column, str) or not PLAIN_NAME.fullmatch(column):
            raise SpecError(f"{what}: column {column!r} is invalid: use letters, digits and underscores")
    if len(set(columns)) != len(columns):
        raise SpecError(f"{what}: a column is named twice in {list(columns)}")
    return columns


def quote_part(name: str) -> str:
    """One name (a table, a database, a column) as safe SQL text: in backticks, a backtick doubled."""
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class TableIdentifier:
    """``[catalog.][database.]table``; parts are kept unquoted."""

    parts: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> TableIdentifier:
        if not isinstance(text, str) or not _WHOLE.fullmatch(text):
            raise SpecError(
                f"invalid table identifier {text!r}: use [catalog.][database.]table with letters, digits and "
                "underscores, or quote a part in backticks"
            )
        parts = tuple(_unquote(p) for p in _SPLIT.findall(_WHOLE.fullmatch(text).group("parts")))
        if any(ch in part for part in parts for ch in "\n\r\t\0"):
            raise SpecError(f"invalid table identifier {text!r}: a part contains a control character")
        return cls(parts)

    @property
    def table(self) -> str:
        return self.parts[-1]

    @property
    def database(self) -> str | None:
        return self.parts[-2] if len(self.parts) > 1 else None

    def quoted(self) -> str:
        """The identifier as safe SQL text: every part in backticks."""
        return ".".join(quote_part(part) for part in self.parts)

    def __str__(self) -> str:
        return ".".join(p if _UNQUOTED.fullmatch(p) else quote_part(p) for p in self.parts)


def _unquote(part: str) -> str:
    if part.startswith("`"):
        return part[1:-1].replace("``", "`")
    return part
