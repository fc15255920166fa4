from __future__ import annotations

import uuid

import pytest

from spark_tables.jobs import files
from spark_tables.jobs.files import read_text, write_text


def test_write_text_creates_missing_folders(tmp_path):
    target = tmp_path / "exchange" / "nested" / "r.json"

    write_text(str(target), '{"kind": "sql"}')

    assert target.read_text(encoding="utf-8") == '{"kind": "sql"}'


def test_write_text_leaves_no_temporary_file_behind(tmp_path):
    write_text(str(tmp_path / "r.json"), "{}")

    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_write_text_accepts_a_file_uri(tmp_path):
    target = tmp_path / "exchange" / "r.json"

    write_text(f"file://{target}", '{"ok": true}')

    assert target.read_text(encoding="utf-8") == '{"ok": true}'
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]


def test_write_text_replaces_an_earlier_result(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("an earlier, longer result", encoding="utf-8")

    write_text(str(target), "new")

    assert target.read_text(encoding="utf-8") == "new"


def test_write_text_keeps_non_ascii_text(tmp_path):
    target = tmp_path / "r.json"

    write_text(str(target), '{"error": "Tabelle „t“ fehlt…"}')

    assert target.read_text(encoding="utf-8") == '{"error": "Tabelle „t“ fehlt…"}'


def test_read_text_reads_a_path_or_a_file_uri(tmp_path):
    (tmp_path / "spec.json").write_text('{"kind": "sql"}', encoding="utf-8")

    assert read_text(str(tmp_path / "spec.json")) == read_text(f"file://{tmp_path}/spec.json") == '{"kind": "sql"}'


def test_a_folder_s_entries_by_kind(tmp_path):
    (tmp_path / "v1").mkdir()
    (tmp_path / "_staging").mkdir()
    for name in ("part-0.parquet", "part-1.parquet", "_SUCCESS", ".part-0.parquet.crc"):
        (tmp_path / name).write_bytes(b"abc")

    assert files.list_names(str(tmp_path)) == sorted(
        ["v1", "_staging", "part-0.parquet", "part-1.parquet", "_SUCCESS", ".part-0.parquet.crc"]
    )
    assert files.folder_names(f"file:{tmp_path}") == ["_staging", "v1"]
    assert files.data_file_names(f"file://{tmp_path}") == ["part-0.parquet", "part-1.parquet"]
    assert files.file_sizes(str(tmp_path))["part-1.parquet"] == 3


def test_a_missing_folder_has_no_entries(tmp_path):
    missing = str(tmp_path / "missing")

    assert files.list_names(missing) == files.folder_names(missing) == files.data_file_names(missing) == []
    assert files.file_sizes(missing) is None
    assert files.exists(missing) is False


def test_folder_bytes_counts_data_files_at_any_depth(tmp_path):
    (tmp_path / "a=1").mkdir()
    (tmp_path / "a=1" / "part-0").write_bytes(b"12345")
    (tmp_path / "part-1").write_bytes(b"12")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / ".part-1.crc").write_bytes(b"1234")

    assert files.folder_bytes(str(tmp_path)) == 7


def test_remove_deletes_a_folder_and_tolerates_a_missing_one(tmp_path):
    (tmp_path / "copy" / "nested").mkdir(parents=True)
    (tmp_path / "copy" / "nested" / "part-0").write_bytes(b"x")

    files.remove(f"file:{tmp_path}/copy")
    files.remove(f"file:{tmp_path}/copy")

    assert list(tmp_path.iterdir()) == []


def test_remove_named_deletes_what_starts_with_the_prefix(tmp_path):
    for name in ("part-q-7-0.parquet", "part-q-7-1.parquet", "part-q-8-0.parquet"):
        (tmp_path / name).write_bytes(b"x")

    assert files.remove_named(str(tmp_path), "part-q-7-") == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-q-8-0.parquet"]


def test_move_and_an_empty_mark(tmp_path):
    (tmp_path / "staging").mkdir()
    (tmp_path / "staging" / "part-0").write_bytes(b"rows")

    files.move(f"file:{tmp_path}/staging/part-0", f"file:{tmp_path}/part-q-0")
    files.write_bytes(f"{tmp_path}/marks/7", b"")

    assert (tmp_path / "part-q-0").read_bytes() == b"rows"
    assert not (tmp_path / "staging" / "part-0").exists()
    assert (tmp_path / "marks" / "7").read_bytes() == b""
    assert files.list_names(f"{tmp_path}/staging") == []


def test_crc32_of_a_file(tmp_path):
    (tmp_path / "f").write_bytes(b"123456789")

    assert files.crc32(str(tmp_path / "f")) == 0xCBF43926  # CRC-32's check value


def test_object_storage_is_written_whole_and_read_back():
    root = f"memory://spark_tables_tests/{uuid.uuid4().hex}"
    try:
        files.write_text(f"{root}/pointer.json", '{"current": null}')

        assert files.read_text(f"{root}/pointer.json") == '{"current": null}'
        assert files.list_names(root) == ["pointer.json"]
        assert files.is_file(f"{root}/pointer.json") is True
    finally:
        files.remove(root)
    assert files.exists(f"{root}/pointer.json") is False


def test_hadoop_s_s3a_is_fsspec_s_s3():
    fs, path = files.filesystem("s3a://bucket/warehouse/t")

    assert "s3" in fs.protocol
    assert path == "bucket/warehouse/t"


def test_an_unknown_scheme_is_one_line_naming_the_location():
    with pytest.raises(files.StorageUnreachable, match=r"^cannot reach nosuch://b/k \(.*\): install the file system"):
        files.filesystem("nosuch://b/k")


def test_reading_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        files.read_text(str(tmp_path / "missing.json"))


def test_create_exclusive_creates_once_and_never_overwrites(tmp_path):
    target = tmp_path / "new" / "claim.json"

    assert files.create_exclusive(str(target), b"first") is True
    assert files.create_exclusive(f"file://{target}", b"second") is False
    assert target.read_bytes() == b"first"


def test_create_exclusive_on_s3_puts_only_where_nothing_is(s3_bucket):
    assert files.create_exclusive(f"{s3_bucket}/claim.json", b"first") is True
    assert files.create_exclusive(f"{s3_bucket}/claim.json", b"second") is False
    assert files.read_bytes(f"{s3_bucket}/claim.json") == b"first"


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("file:/data/x", "/data/x", True),
        ("file:///data/x/", "/data/x", True),
        ("/data/x", "/data/y", False),
        ("s3a://bucket/x", "s3://bucket/x/", True),
        ("hdfs://nn:8020/data/x", "/data/x", False),
        ("s3://bucket/x", "s3://other/x", False),
    ],
)
def test_same_location(first, second, same):
    assert files.same_location(first, second) is same
