"""A Delta table's log read as files (``delta_log``): a commit's info and idempotent-write transactions, the newest
version by the names in the log, the commits after a version (what the streaming sinks find their commit among);
and the MERGE a keyed Delta sink sends."""

from __future__ import annotations

import json
from pathlib import Path

from spark_tables.jobs.table_format import delta_log


def _commit(table: Path, version: int, *actions: dict) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in actions))


def test_a_commit_s_operation_metrics_and_transactions(tmp_path: Path) -> None:
    info = {"operation": "WRITE", "operationMetrics": {"numOutputRows": "3", "numFiles": "1"}}
    _commit(tmp_path, 4, {"commitInfo": info}, {"txn": {"appId": "q", "version": 7}}, {"add": {"path": "p"}})

    made = delta_log.commit(str(tmp_path), 4)

    assert made is not None
    assert (made.version, made.operation, made.count("numOutputRows"), made.count("numFiles")) == (4, "WRITE", 3, 1)
    assert made.count("numTargetFilesAdded") is None
    assert made.transactions == [{"appId": "q", "version": 7}]
    assert delta_log.commit(str(tmp_path), 5) is None, "not made (yet)"


def test_the_newest_version_and_the_commits_after_a_version(tmp_path: Path) -> None:
    assert delta_log.newest_version(str(tmp_path)) == -1, "no log: no commit"
    for version in range(3):
        _commit(tmp_path, version, {"commitInfo": {"operation": f"op{version}"}})
    log = tmp_path / "_delta_log"
    (log / "00000000000000000002.checkpoint.parquet").write_bytes(b"")  # Delta's other files in the log
    (log / "_last_checkpoint").write_text("{}")
    (log / ".00000000000000000002.json.crc").write_text("")

    assert delta_log.newest_version(f"file://{tmp_path}/") == 2
    assert [made.operation for made in delta_log.commits_after(str(tmp_path), 0)] == ["op1", "op2"]
    assert delta_log.commits_after(str(tmp_path), 2) == []


def test_the_merge_of_a_keyed_sink_deletes_updates_and_inserts_by_the_key_null_safe() -> None:
    from spark_tables.jobs.table_format.batch_marks import BatchMarks
    from spark_tables.jobs.table_format.delta_streams import DeltaSinkTable
    from spark_tables.jobs.table_format.tables import DELETED

    table = DeltaSinkTable(name="db.counts", columns=["shop", "odd`name"], location="/t", marks=BatchMarks("/m"))
    assert table._merge("changes", ["shop"]) == (
        "MERGE INTO `db`.`counts` AS t USING changes AS c ON t.`shop` <=> c.`shop` "
        f"WHEN MATCHED AND c.`{DELETED}` THEN DELETE WHEN MATCHED THEN UPDATE SET t.`odd``name` = c.`odd``name` "
        f"WHEN NOT MATCHED AND NOT c.`{DELETED}` THEN INSERT (`shop`, `odd``name`) VALUES (c.`shop`, c.`odd``name`)"
    )
    keys_only = DeltaSinkTable(name="db.seen", columns=["id"], location="/t", marks=BatchMarks("/m"))
    assert "UPDATE" not in keys_only._merge("changes", ["id"]), "nothing to update when every column is the key"
