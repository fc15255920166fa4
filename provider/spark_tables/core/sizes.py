"""Sizes in bytes as people write them: ``500000``, ``800 MB``, ``10 GiB``."""

from __future__ import annotations

import re

from spark_tables.core.errors import SpecError

_SIZE = re.compile(r"\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGTP]?i?B?|bytes?)?\s*", re.IGNORECASE)
_POWERS = {"K": 1, "M": 2, "G": 3, "T": 4, "P": 5}


def parse_size(text: str, what: str) -> int:
    """Bytes in ``text``: a number with an optional unit (kB, MB, GB, TB: powers of 1000; KiB, MiB, GiB, TiB: 1024)."""
    match = _SIZE.fullmatch(str(text))
    if match is None:
        raise SpecError(f"{what} {text!r} is not a size: write a number of bytes, or one with a unit (800 MB, 10 GiB)")
    unit = (match.group("unit") or "").upper()
    base = 1024 if "I" in unit else 1000
    power = _POWERS.get(unit[:1], 0)  # B and BYTES: no power
    return int(float(match.group("number")) * base**power)
