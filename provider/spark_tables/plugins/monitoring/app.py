"""The monitoring app, served by Airflow's API server under ``app_path()``: a page per DAG run, per task instance,
and an overview, each with its JSON twin under ``/api``.

Every route but the style sheet requires Airflow's authentication; a route about a DAG requires the right to
read that DAG's XComs (``READ_DAG``), and the overview shows only DAGs the user may read. Pages are rendered on
the server, charts included (inline SVG), so that they need no script and nothing from outside the API server.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE
from spark_tables.plugins.monitoring.airflow_api import (
    READ_DAG,
    GetUserDep,
    SessionDep,
    failed_provider_tries,
    may_read_logs,
    readable_dag_ids,
    recent_results,
    run_xcoms,
    try_error_line,
    xcom_readable,
)
from spark_tables.plugins.monitoring.cache_copies import cache_storage, memory_storage
from spark_tables.plugins.monitoring.charts import Group, bar_chart, plan_graph
from spark_tables.plugins.monitoring.entries import RETURN_VALUE
from spark_tables.plugins.monitoring.failed_tries import FailedTry, failed_tries
from spark_tables.plugins.monitoring.overview import overview
from spark_tables.plugins.monitoring.summaries import run_label, run_summary, task_summary
from spark_tables.tasks.cache import storage
from spark_tables.utils import settings
from spark_tables.utils.monitoring_urls import app_path, run_path, task_path

log = logging.getLogger(__name__)

#: How far back the overview looks, in days, unless the request says otherwise.
OVERVIEW_DAYS = 7
#: The XComs the overview reads, and how many of the latest at most: a page, not a scan of the whole table.
OVERVIEW_KEYS = (RETURN_VALUE, FAILED_TRY, RELOAD_DUE)
OVERVIEW_LIMIT = 5000
#: Seconds a listing of the cache root serves the overview before it is taken again.
STORAGE_LISTING_SECONDS = 60.0
#: The failed tries the overview lists at most, and how many of their logs one request reads for their error.
FAILED_TRIES_LIMIT, LOG_READS = 200, 20
#: The lookup cache modes, in the order the charts key their colours.
CACHE_MODES = ("NONE", "PARTIAL", "FULL")
HERE = Path(__file__).parent
TEMPLATES = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
TEMPLATES.globals["static"] = lambda name: f"{app_path()}/static/{quote(name)}"


def when(value: Any) -> Markup:
    """A time as the pages show it: to the second, on one line, the full ISO 8601 value in its tooltip."""
    if not value:
        return Markup('<span class="none">\N{EN DASH}</span>')
    try:
        shown = datetime.datetime.fromisoformat(str(value)).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        shown = str(value)
    return Markup('<span class="when" title="{}">{}</span>').format(value, shown)


def path(value: Any) -> Markup:
    """A location or run id that may break only after a ``/`` (or a run id's ``__``), never inside a name or a date:
    each piece on one line, a break allowed between pieces."""
    pieces = [piece for piece in re.split(r"(?<=/)(?!/)|(?<=__)", str(value or "")) if piece]
    inner = Markup("<wbr>").join(Markup('<span class="piece">{}</span>').format(piece) for piece in pieces)
    return Markup('<span class="path">{}</span>').format(inner)


TEMPLATES.filters["when"] = when
TEMPLATES.filters["path"] = path


def map_index_of(text: str) -> int:
    """The task instance's map index; -1 for an unmapped task, for which the UI leaves ``{MAP_INDEX}`` as it is."""
    return int(text) if text.removeprefix("-").isdigit() else -1


def explained_nodes(output: Any) -> list[dict[str, Any]]:
    """The nodes of the compiled plan a task's EXPLAIN PLAN showed (its output's ``explain``); [] for other tasks."""
    explain = output.get("explain") if isinstance(output, dict) else None
    nodes = explain.get("nodes") if isinstance(explain, dict) else None
    return nodes if isinstance(nodes, list) else []


class StorageListing:
    """The copies and runs under the cache root, listed at most once every ``seconds`` for all the overview's
    requests (a listing walks the whole root: on object storage, thousands of requests). ``clock``: monotonic
    seconds, the tests' to set."""

    def __init__(self, seconds: float = STORAGE_LISTING_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._lock = threading.Lock()
        self._taken: tuple[str, float, list[storage.Copy], list[tuple[str, str, str]]] | None = None

    def __call__(self, root: str) -> tuple[list[storage.Copy], list[tuple[str, str, str]]]:
        with self._lock:
            now = self.clock()
            if self._taken is None or self._taken[0] != root or now - self._taken[1] >= self.seconds:
                self._taken = (root, now, storage.copies(root), storage.runs(root))
            return self._taken[2], self._taken[3]


#: The overview's listing of the cache root, shared by every request the API server answers.
storage_listing = StorageListing()


def storage_use(readable: set[str]) -> dict[str, Any]:
    """The cache root's use against its quota, as ``cache_storage`` shows it (by run for ``readable`` DAGs only); from a
    listing at most a minute old; ``error`` when it cannot be listed."""
    root = settings.cache_uri()
    try:
        found, runs = storage_listing(root)
        quota, memory_quota = settings.cache_quota(), settings.cache_memory_quota()
    except Exception as err:  # a page about everything else is still worth showing
        log.warning("could not list the cache storage at %s: %s", root, err)
        return {"root": root, "error": f"could not list {root}: {type(err).__name__}: {err}".splitlines()[0]}
    on_files = [(copy.location, copy.bytes) for copy in found if not copy.memory]
    in_memory = memory_storage(((copy.server, copy.bytes) for copy in found if copy.memory), memory_quota)
    return {
        "root": root,
        "error": None,
        **cache_storage(on_files, runs, quota, readable),
        "memory": in_memory,
        "memory_quota": memory_quota,
    }


def render(template: str, **values: Any) -> HTMLResponse:
    return HTMLResponse(TEMPLATES.get_template(template).render(**values))


def lookup_chart(lookups: list[dict[str, Any]]) -> str:
    joins = [lookup for lookup in lookups if lookup["kind"] == "join"]
    return bar_chart(
        "Hit rate of each lookup join of this run (%), by cache mode",
        [
            Group(f"{j['task_id']} ({j['cache']})", [100 * (j["metrics"].get("hitRate") or 0)], j["cache"])
            for j in joins
        ],
        ["hit rate"],
        " %",
        keys=CACHE_MODES,
    )


def overview_charts(summary: dict[str, Any]) -> dict[str, str]:
    """The overview's charts: each bar names its run (its kind and when) and, for a lookup join, its cache mode,
    which its colour keys too."""
    lookups = "".join(
        bar_chart(
            f"{table['dag_id']} · {table['name']}: hit rate of its recent joins (%), by run and cache mode",
            [
                Group(f"{run_label(join['run_id'])} · {join['cache']}", [100 * (join["hit_rate"] or 0)], join["cache"])
                for join in table["joins"][-12:]
            ],
            ["hit rate"],
            " %",
            keys=CACHE_MODES,
        )
        + bar_chart(
            f"{table['dag_id']} · {table['name']}: load time of its recent reloads (ms), by run",
            [
                Group(run_label(reload["run_id"]), [(reload["snapshot"] or {}).get("load_milliseconds")])
                for reload in table["reloads"][-12:]
            ],
            ["load time"],
            " ms",
        )
        for table in summary["lookups"]
    )
    names = [(table["dag_id"], table["name"]) for table in summary["caches"]]
    caches = bar_chart(
        "Cached tables: mean recompute time against mean read time, from files and from a server's memory (s), by DAG",
        [
            Group(
                f"{table['dag_id']} · {table['name']}"
                + (f" ({table['fingerprint']})" if names.count((table["dag_id"], table["name"])) > 1 else ""),
                [table["mean_recompute_seconds"], table["mean_file_read_seconds"], table["mean_memory_read_seconds"]],
            )
            for table in summary["caches"]
        ],
        ["recompute", "read from files", "read from memory"],
        " s",
    )
    cache = summary["cache_storage"]
    quota = cache.get("quota")
    storage_chart = (
        bar_chart(
            "Cache storage: bytes used against the quota (MB)",
            [Group("cache root", [cache["used"] / 1e6, quota / 1e6])],
            ["used", "quota"],
            " MB",
        )
        if quota
        else ""
    )
    return {"lookups": lookups, "caches": caches, "storage": storage_chart}


def every_failed_try(user: Any, session: Any, dag_ids: set[str], since: datetime.datetime, reported: list) -> dict:
    """Every failed try of this provider's tasks in these DAGs since ``since`` (``failed_tries``), each with its
    one-line error: its report's, else its log's, for a user who may read the DAG's task logs."""
    tries, truncated = failed_provider_tries(session, dag_ids, since, FAILED_TRIES_LIMIT)
    rows = failed_tries(tries, reported)
    readable_logs: dict[str, bool] = {}
    reads = 0
    for row in rows:
        if row["error"] is not None or reads >= LOG_READS:
            continue
        if row["dag_id"] not in readable_logs:
            readable_logs[row["dag_id"]] = may_read_logs(user, row["dag_id"])
        if readable_logs[row["dag_id"]]:
            reads += 1
            keys = ("dag_id", "run_id", "task_id", "map_index", "try_number", "at")
            row["error"] = try_error_line(session, FailedTry(*(row[key] for key in keys)))
    return {"failed_tries": rows, "failed_tries_truncated": truncated}


def create_app() -> FastAPI:
    app = FastAPI(title="Spark tables", description="What this provider's tasks did: cached tables, CTAS, lookups")
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="spark_tables_static")

    @app.get("/api/dags/{dag_id}/runs/{run_id}", dependencies=[READ_DAG])
    def run_api(dag_id: str, run_id: str, session: SessionDep) -> dict[str, Any]:
        return {"dag_id": dag_id, "run_id": run_id, **run_summary(run_xcoms(session, dag_id, run_id))}

    @app.get("/api/dags/{dag_id}/runs/{run_id}/tasks/{task_id}", dependencies=[READ_DAG])
    def task_api(dag_id: str, run_id: str, task_id: str, session: SessionDep, map_index: str = "-1") -> dict[str, Any]:
        index = map_index_of(map_index)
        entries = run_xcoms(session, dag_id, run_id, task_id, index)
        return {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": index, **task_summary(entries)}

    @app.get("/api/overview")
    def overview_api(user: GetUserDep, session: SessionDep, days: int = Query(OVERVIEW_DAYS, ge=1, le=90)) -> dict:
        # What the overview shows of runs comes from their XComs: only of the DAGs whose XComs the user may read.
        dag_ids = xcom_readable(user, readable_dag_ids(user, session))
        since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=days)
        results, truncated = recent_results(session, dag_ids, since, OVERVIEW_KEYS, OVERVIEW_LIMIT)
        summary = overview(results)
        return {
            "days": days,
            "dag_ids": sorted(dag_ids),
            "results": len(results),
            "truncated": truncated,
            **summary,
            **every_failed_try(user, session, dag_ids, since, summary["failed_tries"]),
            "cache_storage": storage_use(dag_ids),
        }

    @app.get("/dags/{dag_id}/runs/{run_id}", dependencies=[READ_DAG], response_class=HTMLResponse)
    def run_page(dag_id: str, run_id: str, session: SessionDep) -> HTMLResponse:
        summary = run_api(dag_id, run_id, session)
        return render(
            "run.html",
            dag_id=dag_id,
            run_id=run_id,
            summary=summary,
            api_url=app_path() + "/api" + run_path(dag_id, run_id),
            lookup_chart=lookup_chart(summary["lookups"]),
            task_url=lambda task_id, index: app_path() + task_path(dag_id, run_id, task_id, index),
        )

    @app.get("/dags/{dag_id}/runs/{run_id}/tasks/{task_id}", dependencies=[READ_DAG], response_class=HTMLResponse)
    def task_page(dag_id: str, run_id: str, task_id: str, session: SessionDep, map_index: str = "-1") -> HTMLResponse:
        summary = task_api(dag_id, run_id, task_id, session, map_index)
        index = summary["map_index"]
        return render(
            "task.html",
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            map_index=index,
            summary=summary,
            output_json=json.dumps(summary["output"], indent=2, default=str),
            plan=plan_graph(explained_nodes(summary["output"])),
            api_url=app_path() + "/api" + task_path(dag_id, run_id, task_id, index),
        )

    @app.get("/overview", response_class=HTMLResponse)
    def overview_page(user: GetUserDep, session: SessionDep, days: int = Query(OVERVIEW_DAYS, ge=1, le=90)):
        summary = overview_api(user, session, days)
        return render(
            "overview.html",
            summary=summary,
            days=days,
            dag_count=len(summary["dag_ids"]),
            charts=overview_charts(summary),
            api_url=f"{app_path()}/api/overview?days={days}",
        )

    return app
