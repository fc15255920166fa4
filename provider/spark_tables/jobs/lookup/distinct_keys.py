"""A probe batch by its distinct keys: which key each row has, and the batch joined to each key's rows.

``DistinctKeys.of`` encodes the key columns of an Arrow batch with Arrow's ``dictionary_encode`` (a multi-column
key by encoding the combined codes of its columns again), so each distinct key is turned into Python values once,
however many rows have it; ``each_row`` keeps every row's key apart instead (NONE's lookup per row). ``join``
builds the output from the rows the lookups of those keys returned: a value table of every distinct key's rows,
from which NumPy index arithmetic and Arrow ``take`` give each probe row its rows. No Python runs per probe row
(but for ``each_row``'s keys).

The output is that of a row-by-row join, in the same order: each probe row in turn, once per row of its key in the
order the lookup returned them, or once with null values when its key has none (left join) or a null (a null
key looks nothing up); an inner join drops those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_tables.jobs.lookup.cache import Key
from spark_tables.jobs.lookup.caching_lookup import Run


def _codes(column: pa.Array) -> tuple[np.ndarray, int]:
    """Per row, the index of its value among the column's distinct values (in order of first occurrence), -1 for a
    null; and how many distinct values there are."""
    encoded = pc.dictionary_encode(column)
    return pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64), len(encoded.dictionary)


@dataclass(frozen=True)
class DistinctKeys:
    """The distinct keys of a batch in order of first occurrence, how many rows have each, and each row's key."""

    keys: list[Key]
    occurrences: list[int]
    #: Per probe row, the index of its key in ``keys``; -1 when a key column is null.
    codes: np.ndarray

    @classmethod
    def of(cls, batch: pa.RecordBatch, on: Sequence[str]) -> DistinctKeys:
        codes, size = _codes(batch.column(on[0]))
        for name in on[1:]:
            more, more_size = _codes(batch.column(name))
            # A pair of codes, below size * more_size, encoded again: the code stays below the batch's row count.
            codes, size = _codes(pa.array(codes * more_size + more, mask=(codes < 0) | (more < 0)))
        keyed_rows = np.flatnonzero(codes >= 0)
        keyed_codes = codes[keyed_rows]
        # Codes count in order of first occurrence: a key's first row has a code above all the codes before it.
        first_rows = keyed_rows[keyed_codes > np.maximum.accumulate(np.concatenate(([-1], keyed_codes[:-1])))]
        values = [batch.column(name).take(first_rows).to_pylist() for name in on]
        return cls(list(zip(*values, strict=True)), np.bincount(keyed_codes, minlength=size).tolist(), codes)

    @classmethod
    def each_row(cls, batch: pa.RecordBatch, on: Sequence[str]) -> DistinctKeys:
        """Each probe row with a key as a key of its own, in row order: NONE's lookup per row, in the rows' order."""
        keyed = np.logical_and.reduce([batch.column(name).is_valid().to_numpy(zero_copy_only=False) for name in on])
        values = [batch.column(name).filter(keyed).to_pylist() for name in on]
        codes = np.where(keyed, np.cumsum(keyed) - 1, -1)
        return cls(list(zip(*values, strict=True)), [1] * int(keyed.sum()), codes)

    def join(
        self,
        batch: pa.RecordBatch,
        answers: Sequence[Sequence[Run]],
        value_names: Sequence[str],
        value_types: Sequence[pa.DataType],
        *,
        inner: bool,
    ) -> pa.RecordBatch:
        """``batch`` with the value columns appended, given each key's ``answers``: the runs of its occurrences'
        lookups, in row order (see ``CachingLookup.lookup_distinct``)."""
        runs = [run for key_runs in answers for run in key_runs]
        # The value table: the rows of each run in turn, then a row of nulls for the probe rows that find none.
        value_rows = [row for rows, _ in runs for row in rows]
        null_row = len(value_rows)
        value_rows.append((None,) * len(value_types))
        found = np.array([len(rows) for rows, _ in runs] + [0], dtype=np.int64)  # a last run for null keys
        starts = np.where(found > 0, np.cumsum(found) - found, null_row)
        counts = np.where(found > 0, found, 0 if inner else 1)  # the output rows of a probe row of each run
        run_of_row = self._run_of_row([occurrences for _, occurrences in runs], null_run=len(runs))
        # Probe row i gives counts[run] output rows, whose values are the value table's from starts[run] on.
        repeats = counts[run_of_row]
        output_rows = int(repeats.sum())
        firsts = np.cumsum(repeats) - repeats  # each probe row's first output row
        taken = pa.array(np.repeat(starts[run_of_row] - firsts, repeats) + np.arange(output_rows))
        values = [pa.array([row[i] for row in value_rows], type=kind).take(taken) for i, kind in enumerate(value_types)]
        probe = batch.take(pa.array(np.repeat(np.arange(len(repeats)), repeats)))
        return pa.RecordBatch.from_arrays([*probe.columns, *values], names=[*batch.schema.names, *value_names])

    def _run_of_row(self, run_lengths: Sequence[int], null_run: int) -> np.ndarray:
        """Per probe row, the index of the run its lookup belongs to; ``null_run`` for a null key.

        With one run a key, a row's run is its key's. Otherwise, sorted by key (stably: in row order within a
        key), the keyed rows fall into the runs one after another: runs come key by key, each key's in order."""
        unkeyed = self.codes < 0
        if len(run_lengths) == len(self.keys):
            return np.where(unkeyed, null_run, self.codes)
        order = np.argsort(self.codes, kind="stable")  # null keys (-1) first
        ends = np.count_nonzero(unkeyed) + np.cumsum(np.asarray(run_lengths, dtype=np.int64))
        run_of_row = np.empty(len(self.codes), dtype=np.int64)
        run_of_row[order] = np.searchsorted(ends, np.arange(len(self.codes)), side="right")
        run_of_row[unkeyed] = null_run
        return run_of_row
