"""The job-level options of plans and streaming aggregations (Flink's names), and the check that each name given is
one of them: an option misspelt would be ignored, and ``table.exec.state.ttl`` misspelt keeps state for ever."""

from __future__ import annotations

import difflib
from typing import Any

from spark_tables.core.errors import SpecError
from spark_tables.core.plan.state import STATE_TTL_OPTION
from spark_tables.core.streaming.flush import (
    DURABLE_STORE_OPTION,
    MAX_ENTRIES_OPTION,
    MAX_INTERVAL_OPTION,
    MEMORY_BUFFER_ONLY_OPTION,
)

#: Flink's option that lets COMPILE PLAN replace an existing plan file.
FORCE_RECOMPILE_OPTION = "table.plan.force-recompile"
#: Flink's option of how many partitions each stateful operator's state has.
PARALLELISM_OPTION = "table.exec.resource.default-parallelism"
KNOWN_OPTIONS = (
    STATE_TTL_OPTION,
    FORCE_RECOMPILE_OPTION,
    PARALLELISM_OPTION,
    MAX_INTERVAL_OPTION,
    MEMORY_BUFFER_ONLY_OPTION,
    MAX_ENTRIES_OPTION,
    DURABLE_STORE_OPTION,
)


def check_option_names(configuration: dict[str, Any], where: str) -> None:
    """Raise ``SpecError`` in one line for the first name that is no known option, naming the nearest known one."""
    for name in sorted(configuration):
        if name in KNOWN_OPTIONS:
            continue
        nearest = difflib.get_close_matches(str(name), KNOWN_OPTIONS, n=1, cutoff=0.0)
        raise SpecError(
            f"{where}: {name!r} is not an option this provider knows: did you mean {nearest[0]!r}? "
            f"(known: {', '.join(KNOWN_OPTIONS)})"
        )
