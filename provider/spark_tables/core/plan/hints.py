"""FLIP-292's ``STATE_TTL`` hint: ``/*+ STATE_TTL('a' = '1d', 'b' = '12h') */`` on a query block, the TTL of the
join inputs or aggregated tables it names.

Both sides read it with sqlglot's Spark dialect, each into ``(name, ttl)`` pairs that ``state_ttls`` checks: the
Airflow side (``utils.sql_reader``) every hint of a ``COMPILE PLAN``'s statements before any job starts, the compiler
each query block's as it applies them (and checks their names against the block's inputs, which only the catalog
knows).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

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


def not_a_pair(pair: str) -> SpecError:
    """What a hint's argument that is no ``'table' = 'ttl'`` pair fails with."""
    return SpecError(f"{STATE_TTL} takes 'table' = 'ttl' pairs, not {pair}")
