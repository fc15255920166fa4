"""Files no one else may read or swap: the spec files and driver logs in the exchange, the job package's folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from spark_tables.core import private_files
from spark_tables.core.private_files import guard_shared_folder, open_private, write_private


def test_a_private_file_is_created_anew_mode_600_never_through_a_planted_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("theirs")
    planted = tmp_path / "r.spec.json"
    planted.symlink_to(victim)

    write_private(str(planted), '{"password": "p"}')

    assert victim.read_text() == "theirs"
    assert not planted.is_symlink() and planted.read_text() == '{"password": "p"}'
    assert stat.S_IMODE(planted.stat().st_mode) == 0o600


def test_a_driver_log_is_created_anew_mode_600(tmp_path: Path) -> None:
    log = tmp_path / "r.log"
    log.write_text("an earlier attempt's")
    os.close(open_private(str(log)))
    assert log.read_text() == "" and stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_shared_folder_of_this_user_s_gets_the_sticky_bit(tmp_path: Path) -> None:
    shared = tmp_path / "exchange"
    shared.mkdir()
    shared.chmod(0o2775)

    guard_shared_folder(str(shared))

    assert stat.S_IMODE(shared.stat().st_mode) == 0o2775 | stat.S_ISVTX


@pytest.mark.parametrize("mode", [0o755, 0o700, 0o1777])
def test_a_folder_only_its_owner_writes_or_a_sticky_one_is_left_as_it_is(tmp_path: Path, mode: int) -> None:
    folder = tmp_path / "exchange"
    folder.mkdir()
    folder.chmod(mode)
    guard_shared_folder(str(folder))
    assert stat.S_IMODE(folder.stat().st_mode) == mode


def test_someone_else_s_shared_folder_without_the_sticky_bit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "exchange"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setattr(private_files.os, "getuid", lambda: folder.stat().st_uid + 1)  # as another user sees it

    with pytest.raises(PermissionError) as caught:
        guard_shared_folder(str(folder))

    assert str(caught.value) == (
        f"{folder} may be written by others and has no sticky bit, so anyone may swap the files this user leaves "
        f"there: run chmod +t {folder} as its owner, or make it writable by its owner alone"
    )
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777
