"""Spark's log lines of known harmless causes, counted instead of passed on to the task log line by line.

A driver logs some warnings that say nothing about the job: the transform-with-state server warns once for every
key it is asked for before the key has state (one per new key: thousands in a large first batch), and every
application logs the same few lines about the host, Hadoop's native library and Hive. Passing them on buries the
lines that matter. Each is counted, and when the driver ends the task log gets one line with each distinct message,
its count and why it is harmless, so nothing is lost but the repetition. A warning not listed here passes on as
Spark wrote it.
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownLine:
    """A Spark log line of a known harmless cause: ``pattern`` is searched for in the line, ``why`` says why."""

    pattern: re.Pattern[str]
    why: str


def _known(pattern: str, why: str) -> KnownLine:
    return KnownLine(re.compile(pattern), why)


#: The lines counted instead of passed on, each with why it is harmless.
KNOWN_LINES = (
    _known(
        r"WARN TransformWithStateInPySparkStateServer: Value state \S+ doesn't contain a value",
        "a key's state read before it has any: one per new key",
    ),
    _known(
        r"WARN TransformWithStateInPySparkStateServer: No more data to read from the socket",
        "a task's Python worker closed its state session: the normal end of one",
    ),
    _known(
        r"WARN Utils: (Your hostname, .* resolves to a loopback address|Set SPARK_LOCAL_IP if you need)",
        "the address Spark chose; SPARK_LOCAL_IP sets another",
    ),
    _known(r"WARN NativeCodeLoader: Unable to load native-hadoop library", "Hadoop's Java code does the same work"),
    _known(
        r"WARN Utils: Service '\w+' could not bind on port \d+\. Attempting port",
        "another application on this machine has the port: Spark takes the next",
    ),
    _known(r"WARNING: Using incubator modules: jdk\.incubator\.vector", "a JVM module Spark uses"),
    _known(
        r"WARN (ResolveWriteToStream: spark\.sql\.adaptive\.enabled is not supported in streaming"
        r"|MicroBatchExecution: Disabling AQE since AQE is not supported in stateful)",
        "adaptive execution does not apply to streaming queries",
    ),
    _known(
        r"WARN HiveExternalCatalog: Couldn't find corresponding Hive SerDe for data source provider",
        "a Spark table, which Hive itself cannot read",
    ),
    _known(
        r"WARN log: (Updated size to \d+|Updating partition stats fast for: )",
        "the Hive metastore updating a table's statistics after a write",
    ),
    _known(
        r"WARN (HiveConf: HiveConf of name \S+ does not exist|SessionState: METASTORE_FILTER_HOOK will be ignored)",
        "Hive settings Spark's Hive client does not use",
    ),
)


class LineTally:
    """Counts a driver's lines of known harmless causes; ``admit`` says which lines pass on as they are."""

    def __init__(self, known: tuple[KnownLine, ...] = KNOWN_LINES) -> None:
        self._known = known
        self._counts: collections.Counter[tuple[int, str]] = collections.Counter()

    def admit(self, line: str) -> bool:
        """False for a line of a known harmless cause (counted), True for any other line."""
        for index, known in enumerate(self._known):
            found = known.pattern.search(line)
            if found:
                message = line[found.start() :].strip().removeprefix("WARN ")
                self._counts[index, message] += 1
                return False
        return True

    def summary(self) -> str | None:
        """One line for all the lines counted: each distinct message with its count, under why it is harmless, in
        the order first seen; None when none was counted."""
        if not self._counts:
            return None
        by_cause: dict[int, list[str]] = {}
        for (index, message), count in self._counts.items():
            by_cause.setdefault(index, []).append(f"{count} x {message}")
        causes = "; ".join(f"[{self._known[index].why}] {', '.join(lines)}" for index, lines in by_cause.items())
        return f"{self._counts.total()} Spark warnings of known harmless causes, not shown: {causes}"
