"""What a task gives Spark besides its job: ``conf`` entries, memory sizes and counts, checked when the DAG is parsed,
so that a mistake fails in one line naming the setting rather than inside spark-submit's JVM."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from spark_tables.core.errors import SpecError

#: A JVM memory size as spark-submit takes it: a whole number, with k, m, g, t or p (and an optional b).
_MEMORY = re.compile(r"\d+(?:[kmgtp]b?)?", re.IGNORECASE)


def check_submit_settings(
    conf: Any,
    driver_memory: Any = None,
    executor_memory: Any = None,
    executor_cores: Any = None,
    num_executors: Any = None,
) -> None:
    """Raise ``SpecError`` in one line for the first setting that is not what Spark takes."""
    if conf is not None:
        if not isinstance(conf, Mapping):
            raise SpecError(f"conf must be a dict of Spark setting names to values, not {type(conf).__name__}")
        for key, value in conf.items():
            if not isinstance(key, str) or not key.strip():
                raise SpecError(f"conf: the setting name {key!r} is not a name: give each setting's name as a string")
            if isinstance(value, Mapping | list | tuple | set) or value is None:
                raise SpecError(
                    f"conf: {key}={value!r} is not a value Spark takes: give a string, a number or true/false"
                )
    for name, value in (("driver_memory", driver_memory), ("executor_memory", executor_memory)):
        if value is not None and not (isinstance(value, str) and _MEMORY.fullmatch(value.strip())):
            raise SpecError(f"{name}={value!r} is not a JVM memory size: write it as spark-submit does (512m, 2g)")
    for name, value in (("executor_cores", executor_cores), ("num_executors", num_executors)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise SpecError(f"{name}={value!r} is invalid: give a whole number from 1")
