"""Where a task try's job result is written: one file per try under an exchange root URI."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def result_uri(exchange_root: str, *, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
    """``<root>/<dag>__<run>__<task>__<map_index>__<try>.json``, each part reduced to path-safe characters.

    One flat file a try, so that deleting it after reading leaves nothing behind, on object stores too.
    """
    parts = [dag_id, run_id, task_id, str(map_index), str(try_number)]
    return exchange_root.rstrip("/") + "/" + "__".join(_UNSAFE.sub("_", p) for p in parts) + ".json"


def local_path(uri: str) -> str | None:
    """The local file path a ``file:`` URI or a plain path names, or None for any other scheme."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    if uri.startswith("file:"):
        return uri[len("file:") :]
    if "://" in uri:
        return None
    return uri
