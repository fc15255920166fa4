"""Path-safe names for files and folders named after Airflow ids (dag, run, task), which may hold any character."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def flat_name(parts: list[str]) -> str:
    """The parts reduced to path-safe characters for reading; a hash of the exact parts keeps names unique."""
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
    return "__".join(_UNSAFE.sub("_", p) for p in parts) + f"__{digest}"
