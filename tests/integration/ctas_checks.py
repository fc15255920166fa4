"""What the CTAS integration tests share: running a scenario DAG through `airflow dags test`, and reading what the
catalog holds straight from the PostgreSQL metastore's tables (TBLS, TABLE_PARAMS), so a test can watch it while a
job runs, and what is on disk from the warehouse folder."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil
import psycopg

from spark_tables.core.catalog_config import PostgresMetastore
from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, SCENARIOS, VENV_BIN, Deployment

STATE = "spark_tables.ctas.state"


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    run_id: str


def with_scenarios(deployment: Deployment) -> Deployment:
    return deployment.with_dags(SCENARIOS)


def metastore_tables(deployment: Deployment) -> dict[str, dict[str, str]]:
    """The default database's tables in the PostgreSQL metastore, with their properties."""
    assert isinstance(deployment.catalog, PostgresMetastore)
    query = """
        SELECT t."TBL_NAME", p."PARAM_KEY", p."PARAM_VALUE" FROM "TBLS" t
        JOIN "DBS" d ON d."DB_ID" = t."DB_ID" LEFT JOIN "TABLE_PARAMS" p ON p."TBL_ID" = t."TBL_ID"
        WHERE d."NAME" = 'default'
    """
    tables: dict[str, dict[str, str]] = {}
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=deployment.catalog.database) as conn:
        for name, key, value in conn.execute(query):
            tables.setdefault(name, {})
            if key is not None:
                tables[name][key] = value
    return tables


def related(tables: dict[str, dict[str, str]], table: str) -> set[str]:
    """The table and every staging or replaced table derived from its name."""
    return {name for name in tables if name == table or name.startswith(f"{table}__")}


def folder(deployment: Deployment, table: str) -> Path:
    assert isinstance(deployment.catalog, PostgresMetastore)
    return Path(deployment.catalog.warehouse) / table


def data_files(folder: Path) -> list[str]:
    return [f for _, _, files in os.walk(folder) for f in files if f.startswith("part-")]


def run_dag(deployment: Deployment, dag_id: str, table: str, **conf: object) -> Run:
    done = deployment.airflow("dags", "test", dag_id, "-c", json.dumps({"table": table, **conf}))
    return Run(done.returncode, done.stdout + done.stderr, last_run_id(deployment, dag_id))


def last_run_id(deployment: Deployment, dag_id: str) -> str:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        row = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
    return row[0] if row else ""


def task_states(deployment: Deployment, dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        rows = db.execute(
            "SELECT task_id, state, try_number FROM task_instance WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
        ).fetchall()
    return {task: (state, tries) for task, state, tries in rows}


def xcom(deployment: Deployment, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> dict | None:
    with sqlite3.connect(deployment.home / "airflow.db") as db:
        row = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = ?",
            (dag_id, run_id, task_id, key),
        ).fetchone()
    return json.loads(row[0]) if row else None


def assert_gone(deployment: Deployment, table: str) -> None:
    left = related(metastore_tables(deployment), table)
    assert left == set(), f"tables left in the catalog: {left}"
    assert not folder(deployment, table).exists(), f"files left under {folder(deployment, table)}"
    for name in os.listdir(folder(deployment, table).parent):
        assert not name.startswith(f"{table}__"), f"a staging or replaced folder was left: {name}"


def assert_exchange_empty(deployment: Deployment) -> None:
    exchange = Path(deployment.env["AIRFLOW__SPARK_TABLES__HOME"]) / "exchange"
    assert not exchange.exists() or os.listdir(exchange) == [], f"left in the exchange: {os.listdir(exchange)}"


def start_dag(deployment: Deployment, dag_id: str, table: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(VENV_BIN / "airflow"), "dags", "test", dag_id, "-c", json.dumps({"table": table})],
        env=deployment.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def read_until(process: subprocess.Popen[str], marker: str, lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)
        if marker in line:
            return
    raise AssertionError(f"the run ended before {marker!r}:\n{''.join(lines[-60:])}")


def read_to_the_end(process: subprocess.Popen[str], lines: list[str], timeout: float) -> None:
    """Read the rest of the run's output and wait for it to end; a run still going ``timeout`` seconds later is
    killed, and the test fails with its last lines."""
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        process.kill()
        reader.join(30)
        raise AssertionError(f"the run had not ended {timeout:.0f} s later:\n{''.join(lines[-60:])}")
    process.wait(timeout=30)


def spark_processes(table: str) -> list[psutil.Process]:
    """spark-submit and the Python driver of the job that creates ``table``: the spec is on their command line, or,
    when it holds a secret (a metastore's password), in the private file their command line names."""
    found = []
    for process in psutil.process_iter():
        try:
            command = " ".join(process.cmdline())
        except psutil.Error:
            continue
        spec_file = re.search(r"@file://(\S+\.spec\.json)", command)
        with contextlib.suppress(OSError):
            command += Path(spec_file[1]).read_text() if spec_file else ""
        if f'"table": "{table}"' in command:
            found.append(process)
    return found
