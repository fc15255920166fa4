"""The mark a sink leaves in its query's checkpoint for the last micro-batch it wrote, where the table itself keeps
no record of the batches written to it: a batch Spark runs again whose mark exists is in the table already."""

from __future__ import annotations

from dataclasses import dataclass

from spark_tables.jobs import files

#: The folder of the checkpoint holding the mark of the last batch a catalog table sink wrote.
TABLE_MARKS = "sink_commits"


@dataclass(frozen=True)
class BatchMarks:
    """The marks of one query's checkpoint."""

    folder: str

    @classmethod
    def of(cls, checkpoint: str) -> BatchMarks:
        return cls(f"{checkpoint.rstrip('/')}/{TABLE_MARKS}")

    def holds(self, batch_id: int) -> bool:
        return files.exists(f"{self.folder}/{batch_id}")

    def record(self, batch_id: int) -> None:
        """Mark the batch written, and forget the one before: Spark runs only its last batch again."""
        files.write_bytes(f"{self.folder}/{batch_id}", b"")
        files.remove(f"{self.folder}/{batch_id - 1}")
