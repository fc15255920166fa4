"""Folders only this process's user may write: where the provider keeps files it later trusts (the job package that
spark-submit ships and drivers import), so that no one else can put or swap a file there between the write and the
read."""

from __future__ import annotations

import contextlib
import os
import stat


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
