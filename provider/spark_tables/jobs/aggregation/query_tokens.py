"""What a streaming aggregation's query calls and whether it groups, read from Spark SQL's tokens (sqlglot's):
strings and comments are left out. The parser is not used: it does not know Spark's ``STREAM(table)`` and
``WATERMARK`` clauses."""

from __future__ import annotations

from itertools import pairwise

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from spark_tables.core.errors import SpecError


def called_names(query: str) -> list[str]:
    """The names the query calls as functions (``name(``), lower case, in order, each once: Spark's catalog then
    tells which are aggregates."""
    tokens = _tokens(query)
    names: list[str] = []
    for token, following in pairwise(tokens):
        if following.token_type != TokenType.L_PAREN or token.token_type in _NOT_NAMES:
            continue
        name = token.text.lower()
        if name not in names:
            names.append(name)
    return names


def groups_rows(query: str) -> bool:
    """Whether the query has a ``GROUP BY`` or a ``DISTINCT``: without either, it aggregates nothing by key."""
    return any(
        token.token_type in (TokenType.GROUP_BY, TokenType.DISTINCT) for token in sqlglot.tokenize(query, "spark")
    )


#: Tokens before a parenthesis that are not a function's name.
_NOT_NAMES = frozenset({TokenType.STRING, TokenType.NUMBER, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.COMMA})


def _tokens(query: str) -> list[Token]:
    try:
        return sqlglot.tokenize(query, read="spark")
    except TokenError as err:
        raise SpecError(f"streaming aggregation: the query cannot be read ({str(err).splitlines()[0]})") from None
