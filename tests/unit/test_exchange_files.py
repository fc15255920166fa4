from __future__ import annotations

from spark_tables.jobs.exchange_files import read_text, write_result


def test_write_result_creates_missing_folders(tmp_path):
    target = tmp_path / "exchange" / "nested" / "r.json"

    write_result(str(target), '{"kind": "sql"}')

    assert target.read_text(encoding="utf-8") == '{"kind": "sql"}'


def test_write_result_leaves_no_temporary_file_behind(tmp_path):
    write_result(str(tmp_path / "r.json"), "{}")

    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_write_result_accepts_a_file_uri(tmp_path):
    target = tmp_path / "exchange" / "r.json"

    write_result(f"file://{target}", '{"ok": true}')

    assert target.read_text(encoding="utf-8") == '{"ok": true}'
    assert [p.name for p in target.parent.iterdir()] == ["r.json"]


def test_write_result_replaces_an_earlier_result(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("an earlier, longer result", encoding="utf-8")

    write_result(str(target), "new")

    assert target.read_text(encoding="utf-8") == "new"


def test_write_result_keeps_non_ascii_text(tmp_path):
    target = tmp_path / "r.json"

    write_result(str(target), '{"error": "Tabelle „t“ fehlt…"}')

    assert target.read_text(encoding="utf-8") == '{"error": "Tabelle „t“ fehlt…"}'


def test_read_text_reads_a_path_or_a_file_uri(tmp_path):
    (tmp_path / "spec.json").write_text('{"kind": "sql"}', encoding="utf-8")

    assert read_text(str(tmp_path / "spec.json")) == read_text(f"file://{tmp_path}/spec.json") == '{"kind": "sql"}'
