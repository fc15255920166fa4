"""Where a task try's job result is written: one file per try under an exchange root URI."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote, urlparse

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def result_uri(exchange_root: str, *, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
    """``<root>/<dag>__<run>__<task>__<map_index>__<try>__<hash>.json``, readable and unique.

    One flat file a try, so that deleting it after reading leaves nothing behind, on object stores too. The
    parts are reduced to path-safe characters for reading; the hash of the exact parts keeps names unique.
    """
    parts = [dag_id, run_id, task_id, str(map_index), str(try_number)]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]
    readable = "__".join(_UNSAFE.sub("_", p) for p in parts)
    return f"{exchange_root.rstrip('/')}/{readable}__{digest}.json"


def local_path(uri: str) -> str | None:
    """The local file path a ``file:`` URI (of no host or localhost) or a plain path names; None otherwise."""
    if "://" not in uri and not uri.startswith("file:"):
        return uri
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return unquote(parsed.path)
