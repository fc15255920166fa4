"""A Delta table's transaction log read as files from the job's side (``core/table_format/delta_log.py`` reads a
commit's file): a commit by its version, the newest version, the commits after a version, the table's version."""

from __future__ import annotations

from spark_tables.core.table_format.delta import DELTA
from spark_tables.core.table_format.delta_log import Commit, commit_file, log_folder, newest_commit, parse_commit
from spark_tables.core.table_format.version import TableVersion
from spark_tables.jobs import files


def commit(location: str, version: int) -> Commit | None:
    """The commit ``version`` of the table at ``location``; None when its file is not there (not yet made, or
    removed by the log's cleanup)."""
    try:
        text = files.read_text(commit_file(location, version))
    except (FileNotFoundError, files.StorageUnreachable):
        return None
    return parse_commit(version, text)


def newest_version(location: str) -> int:
    """The version of the table's newest commit, from the names in its log; -1 when it has none."""
    return newest_commit(files.list_names(log_folder(location)))


def commits_after(location: str, version: int) -> list[Commit]:
    """The table's commits after ``version``, oldest first."""
    found = (commit(location, later) for later in range(version + 1, newest_version(location) + 1))
    return [made for made in found if made is not None]


def table_version(location: str) -> TableVersion | None:
    """The table's version (its newest commit's number and id), from its log; None when it has no commit."""
    return DELTA.version(location, files.list_names, files.read_text)
