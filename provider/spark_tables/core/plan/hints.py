"""FLIP-292's ``STATE_TTL`` hint: ``/*+ STATE_TTL('a' = '1d', 'b' = '12h') */`` on a query block, the TTL of the
join inputs or aggregated tables it names.

Both sides parse the SQL with sqlglot's Spark dialect and hand each hint's items to ``hint_pairs``, whose pairs
``state_ttls`` checks: the Airflow side (``tasks.sql_reader``) every hint of a ``COMPILE PLAN``'s statements before any
job starts, the compiler each query block's as it applies them (and checks their names against the block's inputs,
which only the catalog knows). ``hint_pairs`` reads sqlglot's nodes by their kind (``key``), so that ``core`` imports
no parser.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from spark_tables.core.durations import parse_duration
from spark_tables.core.errors import SpecError

#: The hint's name, in any case.
STATE_TTL = "STATE_TTL"


def state_ttls(hints: Iterable[Iterable[tuple[str, str]]]) -> dict[str, timedelta]:
    """The TTL of each name a query block's ``STATE_TTL`` hints give (each hint's ``(name, ttl)`` pairs), by lower-case
    name; ``SpecError`` naming a duration that does not read.

    Within one hint the last value of a name wins; across several STATE_TTL hints, the first (as in Flink).
    """
    found: dict[str, timedelta] = {}
    for pairs in hints:
        this_hint = {name.lower(): parse_duration(ttl, f"{STATE_TTL}('{name}')") for name, ttl in pairs}
        for name, ttl in this_hint.items():
            found.setdefault(name, ttl)
    return found


def hint_pairs(item: Any) -> list[tuple[str, str]] | None:
    """A hint's item (a sqlglot expression: ``STATE_TTL('a' = '1d')``) as its ``(name, ttl)`` pairs; None for a hint
    of another name; ``SpecError`` for an argument that is no ``'table' = 'ttl'`` pair."""
    if not isinstance(getattr(item, "name", None), str) or item.name.upper() != STATE_TTL:
        return None
    pairs = []
    for pair in item.expressions:
        if pair.key != "eq" or getattr(pair.expression, "key", None) != "literal":
            raise SpecError(f"{STATE_TTL} takes 'table' = 'ttl' pairs, not {pair.sql('spark')}")
        pairs.append((pair.this.name, pair.expression.name))
    return pairs
