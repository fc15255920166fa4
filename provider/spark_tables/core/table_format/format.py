"""What a table format asks of a Spark application before its first statement: jars on the classpath of its driver
and executors, and static settings (SQL extensions, the session catalog) that only a session's start can take."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from spark_tables.core.errors import SpecError
from spark_tables.core.table_format.version import ListNames, ReadText, TableVersion

#: How a format finds a table's newest commit in its log: its number and id, or None where it has none.
ReadVersion = Callable[[str, ListNames, ReadText], "tuple[int, str] | None"]


@dataclass(frozen=True)
class TableFormat:
    """A table format Spark loads from jars of ``jvm/pom.xml`` (``core.jvm_jars``): ``name`` is the word of
    ``USING``; ``coordinates`` are the jars' Maven coordinates, for a deployment that fetches them another way;
    ``extensions`` and ``session_catalog`` are the classes a session takes as ``spark.sql.extensions`` and
    ``spark.sql.catalog.spark_catalog``; ``read_version`` reads a table's version from its log."""

    name: str
    jars: tuple[str, ...]
    coordinates: tuple[str, ...]
    extensions: str
    session_catalog: str
    read_version: ReadVersion

    def version(self, location: str, list_names: ListNames, read_text: ReadText) -> TableVersion | None:
        """The version of this format's table at ``location``, read from its log with the storage functions of the
        side that asks (never its data); None where there is no table of this format."""
        newest = self.read_version(location, list_names, read_text)
        if newest is None:
            return None
        number, commit = newest
        return TableVersion(format=self.name, location=location, number=number, commit=commit)

    def check_jars(self, setting: str) -> None:
        """Fail in one line if one of its jars is not a file here, naming what to do; ``setting`` names where a
        deployment leaves the format out."""
        missing = next((jar for jar in self.jars if not os.path.isfile(jar)), None)
        if missing is not None:
            raise SpecError(
                f"table format {self.name}: jar {missing} not found: fetch the jars jvm/pom.xml declares "
                f"(scripts/setup.sh does; docs/configuration.md#jvm-jars), give Spark {','.join(self.coordinates)} "
                f"another way, or leave {self.name} out of {setting}"
            )
