"""Where a task try's job result is written: one file per try under an exchange root URI."""

from __future__ import annotations

from urllib.parse import unquote, urlparse

from spark_tables.core.names import flat_name


def result_uri(
    exchange_root: str,
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    map_index: int,
    try_number: int,
    purpose: str = "",
) -> str:
    """``<root>/<dag>__<run>__<task>__<map_index>__<try>[__<purpose>]__<hash>.json``, readable and unique.

    One flat file a try (and a ``purpose`` when one try runs more than one job), so that deleting it after
    reading leaves nothing behind, on object stores too.
    """
    parts = [dag_id, run_id, task_id, str(map_index), str(try_number), *([purpose] if purpose else [])]
    return f"{exchange_root.rstrip('/')}/{flat_name(parts)}.json"


def claim_uri(exchange_root: str, *, dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """Where a task notes which tables its tries may leave unfinished, until that is known not to be so."""
    return f"{exchange_root.rstrip('/')}/{flat_name([dag_id, run_id, task_id, str(map_index)])}.claim.json"


def spec_uri(result_uri: str) -> str:
    """Where the task leaves a job spec too long for a command line, beside the result; the driver reads it."""
    return result_uri.removesuffix(".json") + ".spec.json"


def metrics_uri(result_uri: str) -> str:
    """Where a job's executor workers leave their metrics for the driver to add up: a folder beside the result."""
    return result_uri.removesuffix(".json") + ".metrics"


def cancel_uri(result_uri: str) -> str:
    """Where the task asks its job to stop: a marker file beside the result, which the driver watches for."""
    return result_uri.removesuffix(".json") + ".cancel"


def started_uri(result_uri: str) -> str:
    """Where a durable job's driver says that its session started, and in which application: beside the result."""
    return result_uri.removesuffix(".json") + ".started.json"


def log_uri(result_uri: str) -> str:
    """Where a durable job's spark-submit writes its output, for any try of the task to follow: beside the result."""
    return result_uri.removesuffix(".json") + ".log"


def local_path(uri: str) -> str | None:
    """The local file path a ``file:`` URI (of no host or localhost) or a plain path names; None otherwise."""
    if "://" not in uri and not uri.startswith("file:"):
        return uri
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return unquote(parsed.path)
