"""The README's Quick start as a user follows it, so that it cannot drift from the code again.

Each of its Python snippets is saved as it stands in one DAGs folder; around them goes only what the README
states: its PostgreSQL tables (the ``psql`` block, run as written), for each snippet the ``export`` lines of the
paragraph above it (its connection, the XCom backend), nothing else: the deployment's own XCom backend setting is
taken away; and for session mode the server its last ``bash`` block starts. Then ``airflow dags test`` runs them one
after the other in one deployment (one catalog): first per job, after the demo's SQL example (whose
``demo.daily_totals`` the README's SQL snippet once collided with), in the README's order; then for another day in
session mode, in the reverse order. Each run must succeed and leave the rows it should.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pandas as pd
import psycopg
import pytest

from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, REPO, Deployment, embedded_deployment

pytestmark = pytest.mark.integration

README = REPO / "README.md"
SETUP_DAG = "quickstart_tables"
#: The database the README's PostgreSQL lines name (psql's -d and the connection's path).
README_DATABASE = "postgres"
DAY_1, DAY_2 = "2026-11-21", "2026-11-22"
SHOPS = 5
CUSTOMERS = 50
ORDERS_A_DAY = 1000


@dataclasses.dataclass(frozen=True)
class Snippet:
    dag_id: str
    code: str
    #: ``export NAME=value`` lines in the paragraph above the snippet: what it says the snippet needs set.
    exports: dict[str, str]


#: The ``bash`` block of the Quick start that starts session mode's server and makes it ``spark_default``.
SESSION_BLOCK = """export AIRFLOW_CONN_SPARK_DEFAULT
AIRFLOW_CONN_SPARK_DEFAULT=$(bash scripts/connect_server.sh start)
"""


def quick_start() -> tuple[list[Snippet], list[str]]:
    """The Quick start section's Python snippets, in order, and its shell blocks."""
    section = README.read_text().split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    snippets: list[Snippet] = []
    shell: list[str] = []
    prose_start = 0
    for block in re.finditer(r"^```(\w+)\n(.*?)^```$", section, re.S | re.M):
        prose = section[prose_start : block.start()]
        prose_start = block.end()
        language, code = block.groups()
        if language == "bash":
            shell.append(code)
        elif language == "python":
            [dag_id] = re.findall(r'with DAG\(dag_id="(\w+)"', code)  # each snippet is a whole DAG
            exports = dict(re.findall(r"`export (\w+)=([^`\s]+)`", re.sub(r"\s+", " ", prose)))
            snippets.append(Snippet(dag_id, code, exports))
    return snippets, shell


def test_each_snippet_states_the_connections_and_the_xcom_backend_it_uses() -> None:
    snippets, shell = quick_start()
    assert snippets[0].dag_id == SETUP_DAG and len(snippets) == 7, [s.dag_id for s in snippets]
    assert len({s.dag_id for s in snippets}) == len(snippets), "one DAGs folder holds them all"
    for snippet in snippets:
        for conn_id in re.findall(r'conn_id="(\w+)"', snippet.code):
            assert f"AIRFLOW_CONN_{conn_id.upper()}" in snippet.exports, f"{snippet.dag_id}: {conn_id} not stated"
        if "CachedTable(" in snippet.code:
            assert "AIRFLOW__CORE__XCOM_BACKEND" in snippet.exports, f"{snippet.dag_id}: the XCom backend"
    tables, session = shell
    assert [line.split()[0] for line in tables.splitlines() if line[:1].isalpha()] == ["psql"]
    assert session == SESSION_BLOCK, "the test starts session mode's server as this block does: change both"


def _pg(query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=README_DATABASE, autocommit=True) as db:
        cursor = db.execute(query)
        return cursor.fetchall() if cursor.description else []


def _as_test_server(value: str) -> str:
    """The README's connection names PostgreSQL at 127.0.0.1:5432; the tests' server may listen on another port
    (SPARK_TABLES_TEST_PG_PORT): only the port is replaced, host, user and database stay the README's."""
    return value.replace("@127.0.0.1:5432/", f"@127.0.0.1:{PG_PORT}/")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> tuple[Deployment, list[Snippet]]:
    """An embedded deployment of the README's own (the catalog the snippets share, which the other files' runs of
    the examples on ``embedded`` must not meet) reading the snippets' DAGs folder, without an XCom backend of its own,
    and the README's PostgreSQL tables made as it says (psql reads the port from PGPORT, as the README's line names
    none)."""
    embedded = embedded_deployment(tmp_path_factory.mktemp("airflow-readme"))
    assert (PG_HOST, PG_USER) == ("127.0.0.1", "postgres"), (
        "the README's PostgreSQL lines name postgres@127.0.0.1 (any port): run the tests against such a server"
    )
    snippets, shell = quick_start()
    dags = tmp_path_factory.mktemp("quickstart_dags")
    for snippet in snippets:
        (dags / f"{snippet.dag_id}.py").write_text(snippet.code)
    _pg("DROP SCHEMA IF EXISTS quickstart CASCADE")  # left by an earlier session on this server
    tables, _ = shell
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", tables],
        env={**os.environ, "PGPORT": str(PG_PORT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    env = {key: value for key, value in embedded.with_dags(dags).env.items() if key != "AIRFLOW__CORE__XCOM_BACKEND"}
    return dataclasses.replace(embedded, env=env), snippets


@contextlib.contextmanager
def session_mode(deployment: Deployment) -> Iterator[Deployment]:
    """The deployment with ``spark_default`` on the server the README's session block starts, on the deployment's
    catalog: the block run as written, but for ``scripts/connect_server.py`` in place of ``scripts/connect_server.sh``,
    which runs it after pointing ``AIRFLOW_HOME`` at the repository's ``.airflow`` (scripts/setup.sh). The server is
    stopped as the README says, on the way out."""
    script = "python scripts/connect_server.py"
    block = SESSION_BLOCK.replace("bash scripts/connect_server.sh", script)
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block + 'printf %s "$AIRFLOW_CONN_SPARK_DEFAULT"'],
            cwd=REPO,
            env=deployment.env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        yield dataclasses.replace(deployment, env={**deployment.env, "AIRFLOW_CONN_SPARK_DEFAULT": done.stdout})
    finally:
        stop = subprocess.run(
            ["bash", "-c", f"{script} stop"], cwd=REPO, env=deployment.env, capture_output=True, text=True, check=False
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr


def _run(deployment: Deployment, dag_id: str, day: str, exports: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``airflow dags test`` of ``dag_id`` for ``day`` with the snippet's exports set: its XComs, by task."""
    env = {**deployment.env, **{name: _as_test_server(value) for name, value in (exports or {}).items()}}
    done = dataclasses.replace(deployment, env=env).airflow("dags", "test", dag_id, day)
    assert done.returncode == 0, f"{dag_id} for {day}:\n" + done.stdout[-6000:] + done.stderr[-3000:]
    return deployment.latest_xcoms(dag_id)


def _day_totals() -> dict[int, Decimal]:
    """Each customer's amount in one day of the setup's orders (the same every day)."""
    totals = dict.fromkeys(range(CUSTOMERS), Decimal(0))
    for i in range(ORDERS_A_DAY):
        totals[i % CUSTOMERS] += i % 97
    return totals


def _check(deployment: Deployment, dag_id: str, x: dict[str, Any], day: str, days: int) -> None:
    """What the snippet's run must have done, on the ``days``-th day of orders loaded."""
    totals = _day_totals()
    if dag_id == "quickstart_sql":
        summary = x["summarise"]
        assert summary["tables_written"] == ["quickstart.daily_totals"]
        assert [row[0] for row in summary["rows"]] == list(range(CUSTOMERS))
        assert [(row[1], Decimal(str(row[2])), row[3]) for row in summary["rows"]] == [
            (ORDERS_A_DAY // CUSTOMERS, totals[c], day) for c in range(CUSTOMERS)
        ]
    elif dag_id == "quickstart_ctas":
        snapshot = x["snapshot_orders"]
        assert snapshot["table"].endswith("orders_" + day.replace("-", ""))
        assert (snapshot["rows"], snapshot["created"]) == (ORDERS_A_DAY, True)
        assert (snapshot["format"], snapshot["atomicity"], snapshot["committed_version"]) == ("delta", "commit", 0)
    elif dag_id == "quickstart_cache":
        assert [x[task]["caches"]["per_customer"]["status"] for task in ("top", "low")] == ["miss", "hit"]
        # per_customer sums every day loaded so far
        assert Decimal(str(x["top"]["rows"][0][0])) == days * max(totals.values())
        assert Decimal(str(x["low"]["rows"][0][0])) == days * min(totals.values())
        assert list(x["release_caches"]["released"]) == ["per_customer"]
    elif dag_id == "quickstart_lookup":
        enrich = x["enrich"]
        assert enrich["rows"] == ORDERS_A_DAY and enrich["cache"] == "PARTIAL"
        assert enrich["metrics"]["hitCount"] + enrich["metrics"]["missCount"] == ORDERS_A_DAY
        table = pd.read_parquet(deployment.home / "spark_tables" / "warehouse" / "quickstart.db" / "orders_enriched")
        assert len(table) == ORDERS_A_DAY and table["name"].notna().all()  # every customer is in PostgreSQL
        assert (table["name"] == "customer " + table["customer_id"].astype(str)).all()
    elif dag_id == "quickstart_shops":
        reload, enrich = x["reload"], x["enrich"]
        # made once, IF NOT EXISTS: a SQL job's CTAS is two commits, the table and then its completion mark
        assert reload["snapshot"]["table_version"]["number"] == 1
        if days == 1:
            assert (reload["loaded"], reload["unchanged"]) == (True, False)
        else:  # the table is at the version its snapshot holds: no Spark job
            assert (reload["loaded"], reload["unchanged"], reload["application_id"]) == (False, True, None)
        assert (enrich["rows"], enrich["cache"], enrich["table_version"]["number"]) == (ORDERS_A_DAY, "FULL", 1)
        table = pd.read_parquet(deployment.home / "spark_tables" / "warehouse" / "quickstart.db" / "orders_by_region")
        expected = table["shop"].map(lambda shop: "north" if int(shop.removeprefix("shop_")) < 3 else "south")
        assert len(table) == ORDERS_A_DAY and (table["region"] == expected).all()
    elif dag_id == "quickstart_plan":
        assert x["compile"]["compile"]["written"] is (days == 1)  # then kept, IF NOT EXISTS
        [query] = x["execute"]["execute"]["queries"]
        assert query["input_rows"] == ORDERS_A_DAY  # the new day's orders only: it resumed from its checkpoint
        assert dict(_pg("SELECT shop, orders FROM quickstart.shop_counts")) == {
            f"shop_{n}": days * ORDERS_A_DAY // SHOPS for n in range(SHOPS)
        }
    else:
        raise AssertionError(f"no check for the README's {dag_id}: add one")


def test_the_snippets_run_in_one_catalog_after_the_demo_and_in_any_order(
    quickstart: tuple[Deployment, list[Snippet]],
) -> None:
    deployment, snippets = quickstart
    setup, *others = snippets
    _run(deployment.with_dags(REPO / "dags"), "example_spark_sql", DAY_1)  # the demo's demo.daily_totals exists

    def run_all(deployment: Deployment, mode: str, day: str, days: int, order: list[Snippet]) -> None:
        for snippet in [setup, *order]:
            x = _run(deployment, snippet.dag_id, day, snippet.exports)
            # all but release_caches, and a reload that found its Delta table unchanged (it ran no job)
            jobs = [value for value in x.values() if "mode" in value and not value.get("unchanged")]
            assert jobs and {job["mode"] for job in jobs} == {mode}, (snippet.dag_id, day)
            if snippet is not setup:
                _check(deployment, snippet.dag_id, x, day, days)

    run_all(deployment, "per-job", DAY_1, 1, others)
    with session_mode(deployment) as in_session:
        run_all(in_session, "session", DAY_2, 2, others[::-1])
