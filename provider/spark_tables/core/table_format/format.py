"""What a table format asks of a Spark application before its first statement: jars on the classpath of its driver
and executors, and static settings (SQL extensions, the session catalog) that only a session's start can take."""

from __future__ import annotations

import os
from dataclasses import dataclass

from spark_tables.core.errors import SpecError


@dataclass(frozen=True)
class TableFormat:
    """A table format Spark loads from jars of ``jvm/pom.xml`` (``core.jvm_jars``): ``name`` is the word of
    ``USING``; ``coordinates`` are the jars' Maven coordinates, for a deployment that fetches them another way;
    ``extensions`` and ``session_catalog`` are the classes a session takes as ``spark.sql.extensions`` and
    ``spark.sql.catalog.spark_catalog``."""

    name: str
    jars: tuple[str, ...]
    coordinates: tuple[str, ...]
    extensions: str
    session_catalog: str

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
