"""File streams a test feeds step by step, one available-now run per step, and changelogs materialized."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, DataFrameReader, Row, SparkSession

from spark_tables.jobs.changelog import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    UPDATE_BEFORE,
    insert_only,
    is_accumulate,
)
from spark_tables.jobs.session_conf import session_conf
from spark_tables.jobs.streaming.session_confs import SESSION_CONFS

#: How Flink prints each row kind.
SHORT_NAMES = {INSERT: "+I", UPDATE_BEFORE: "-U", UPDATE_AFTER: "+U", DELETE: "-D"}


class JsonSource:
    """A folder of JSON-lines files: each ``add`` is one new file, which one micro-batch reads.

    The rows are insert-only, or with ``changelog`` a changelog whose last column is ``__row_kind``.
    """

    def __init__(self, folder: Path, schema: str, changelog: bool = False) -> None:
        self.folder, self.schema, self.changelog = folder, schema, changelog
        folder.mkdir(parents=True)
        self.files = 0
        #: File times one second apart, so that a stream reading one file per batch reads them in order.
        self.first_mtime = time.time() - 3600

    def add(self, *rows: dict[str, Any]) -> None:
        path = self.folder / f"part-{self.files:05d}.json"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        os.utime(path, (self.first_mtime + self.files, self.first_mtime + self.files))
        self.files += 1

    def stream(self, spark: SparkSession, file_per_batch: bool = False) -> DataFrame:
        """The files as a changelog stream; ``file_per_batch``: one micro-batch per file."""
        reader = spark.readStream.schema(self.schema)
        if file_per_batch:
            reader = reader.option("maxFilesPerTrigger", 1)
        frame = reader.json(str(self.folder))
        return frame if self.changelog else insert_only(frame)

    def table(self, spark: SparkSession) -> DataFrame:
        """All the files' rows, as a batch DataFrame without a changelog column."""
        return spark.read.schema(self.schema).json(str(self.folder))


#: A test's queries have few keys: one state store per stateful operator is enough, and each batch opens and
#: commits every store of every operator, so one partition instead of the session's two halves that work.
TEST_CONFS = {**SESSION_CONFS, "spark.sql.shuffle.partitions": "1"}


def stream_session(spark: SparkSession) -> AbstractContextManager[None]:
    """The session confs the operators need (``SESSION_CONFS``) and one shuffle partition, put back afterwards."""
    return session_conf(spark, TEST_CONFS)


def run_batches(
    frame: DataFrame, checkpoint: Path, output_mode: str = "append", confs: dict[str, str] | None = None
) -> list[list[Row]]:
    """One available-now run of ``frame`` from ``checkpoint``, started with the session confs ``confs``: the rows
    of each micro-batch it wrote."""
    batches: list[list[Row]] = []
    writer = (
        frame.writeStream.foreachBatch(lambda batch, _: batches.append(batch.collect()))
        .outputMode(output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    with session_conf(frame.sparkSession, confs or {}):
        query = writer.start()
    query.awaitTermination()
    return batches


def run(
    frame: DataFrame, checkpoint: Path, output_mode: str = "append", confs: dict[str, str] | None = None
) -> list[Row]:
    """One available-now run of ``frame`` from ``checkpoint``: the rows it wrote, batch after batch."""
    return [row for batch in run_batches(frame, checkpoint, output_mode, confs) for row in batch]


def changes(rows: Iterable[Row]) -> Counter[tuple[str, tuple[Any, ...]]]:
    """A changelog's rows as ``(kind, row)`` with Flink's short kind names, ignoring their order."""
    return Counter((SHORT_NAMES[row[-1]], tuple(row[:-1])) for row in rows)


def materialize(rows: Iterable[Row], into: Counter[tuple[Any, ...]] | None = None) -> Counter[tuple[Any, ...]]:
    """The multiset a changelog leaves: +I/+U add a row, -U/-D take one away (which must be there)."""
    table = Counter() if into is None else into
    pending: list[tuple[Any, ...]] = []
    for row in rows:
        data = tuple(row[:-1])
        if is_accumulate(row[-1]):
            table[data] += 1
        else:
            pending.append(data)
    # A batch's rows come back in no particular order: its retractions are applied after its additions.
    for data in pending:
        assert table[data] > 0, f"the changelog retracts {data}, which it does not hold: {dict(table)}"
        table[data] -= 1
    return +table


def materialize_batches(batches: Iterable[Iterable[Row]]) -> Counter[tuple[Any, ...]]:
    """The multiset a changelog leaves, checked batch after batch."""
    table: Counter[tuple[Any, ...]] = Counter()
    for batch in batches:
        table = materialize(batch, table)
    return table


class StateReader:
    """The state a query left in its checkpoint, read with Spark's state data source after each run."""

    def __init__(self, spark: SparkSession, checkpoint: Path) -> None:
        self.spark, self.checkpoint = spark, checkpoint
        self._operators: dict[str, int] = {}

    def rows(self, state_name: str) -> list[Row]:
        """The rows of the state variable ``state_name``, as the last batch left them."""
        return self._reader(state_name).option("stateVarName", state_name).load().collect()

    def keys(self, state_name: str, side: int | None = None) -> set[Any]:
        """The grouping keys (their first column) that have a value in the state variable ``state_name``; with
        ``side``, only those with a list element of that join side."""
        rows = self.rows(state_name)
        return {row.key[0] for row in rows if side is None or row.list_element.side == side}

    def timers(self, state_name: str) -> int:
        """How many processing-time timers the operator that has the state variable ``state_name`` has set."""
        return len(self._reader(state_name).option("readRegisteredTimers", "true").load().collect())

    def _reader(self, state_name: str) -> DataFrameReader:
        if not self._operators:  # the same plan at every run: its operators are read once
            for row in self.spark.read.format("state-metadata").load(str(self.checkpoint)).collect():
                for variable in json.loads(row.operatorProperties)["stateVariables"]:
                    self._operators[variable["stateName"]] = row.operatorId
        reader = self.spark.read.format("statestore").option("path", str(self.checkpoint))
        return reader.option("operatorId", self._operators[state_name])
