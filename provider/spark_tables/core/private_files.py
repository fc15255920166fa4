"""Files that hold what no one else may read or swap: the job package that spark-submit ships and drivers import, and
the job specs and driver logs in the exchange, which can hold passwords.

A folder of the user's alone (``private_folder``) keeps anyone else from putting or swapping a file there between
the write and the read. A shared folder (the exchange, group-writable where Airflow's image runs containers under
group 0) is used only with the sticky bit, so that no one else may rename or delete this user's files in it
(``guard_shared_folder``); files are created anew, never through a link, mode 600 (``write_private``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat

log = logging.getLogger(__name__)


def private_folder(path: str) -> str:
    """``path``, made for this user alone (mode 700) if it is not there; ``PermissionError`` in one line when it is not
    a folder this user owns that no one else may write (someone else made it first, or opened it to others)."""
    parent = os.path.dirname(path.rstrip("/"))
    if parent:
        os.makedirs(parent, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o022:
        raise PermissionError(
            f"{path} is not a folder of this user's that no one else may write: remove it (the provider makes it "
            "anew, mode 700), so that no file someone else put there is trusted"
        )
    return path


def guard_shared_folder(path: str) -> None:
    """Make sure no one else can swap this user's files in ``path``: a folder others may write gets the sticky bit
    if this user owns it; ``PermissionError`` in one line when it has none and this user cannot give it."""
    os.makedirs(path, exist_ok=True)
    found = os.stat(path)
    if not found.st_mode & 0o022 or found.st_mode & stat.S_ISVTX:
        return
    if found.st_uid != os.getuid():
        raise PermissionError(
            f"{path} may be written by others and has no sticky bit, so anyone may swap the files this user leaves "
            f"there: run chmod +t {path} as its owner, or make it writable by its owner alone"
        )
    os.chmod(path, stat.S_IMODE(found.st_mode) | stat.S_ISVTX)
    log.info("%s may be written by others: gave it the sticky bit, so that no one else may swap its files", path)


def write_private(path: str, text: str) -> None:
    """Write ``text`` into a new file only its owner may read (``open_private``)."""
    with os.fdopen(open_private(path), "w", encoding="utf-8") as handle:
        handle.write(text)


def open_private(path: str) -> int:
    """The descriptor of a new file only its owner may read: whatever was at ``path`` (an earlier attempt's file) is
    removed first, and the file is created exclusively, never through a symbolic link someone put there."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
