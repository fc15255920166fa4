"""The monitoring pages in a real browser: Debian's chromium, driven by Playwright, on Airflow's API server after
real runs of the cache and lookup example DAGs. A viewer logs in through Airflow's login page, opens the DAG
run's tab, a task's tab and the overview in the navigation, and finds there what the runs' XComs hold.
Screenshots go to ``SPARK_TABLES_TEST_ARTIFACTS`` (default ``.spark_tables/test-artifacts/monitoring``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import FrameLocator, Page, sync_playwright

from spark_tables.core.xcom_keys import RELOAD_DUE
from spark_tables.utils.monitoring_urls import task_tab_url
from tests.integration.conftest import PG_HOST, PG_PORT, PG_USER, REPO
from tests.integration.monitoring_server import ApiServer, api_server

pytestmark = pytest.mark.integration

#: The lookup example's dimension table lives in a database of its own, so that no other test's seeding meets it.
DATABASE = "spark_tables_monitoring_test"
CHROMIUM = os.environ.get("SPARK_TABLES_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(
    os.environ.get("SPARK_TABLES_TEST_ARTIFACTS", REPO / ".spark_tables" / "test-artifacts" / "monitoring")
)
#: As the machine's notes say: without the background-networking flags, chromium keeps calling out.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
            db.execute(f"CREATE DATABASE {DATABASE}")
    connection = f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{DATABASE}"
    home = tmp_path_factory.mktemp("airflow-monitoring-browser")
    dags = ["example_spark_cache", "example_spark_lookup"]
    with api_server(home, REPO / "dags", dags, AIRFLOW_CONN_SPARK_TABLES_LOOKUP_DEMO=connection) as served:
        yield served


@pytest.fixture(scope="module")
def page(server: ApiServer) -> Iterator[Page]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    passwords = json.loads((server.home / "simple_auth_manager_passwords.json.generated").read_text())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        opened = browser.new_page(viewport={"width": 1400, "height": 1000})
        opened.goto(server.url("/"))
        opened.get_by_label("Username").fill("bob")
        opened.get_by_label("Password").fill(passwords["bob"])
        opened.get_by_role("button", name="Sign in").click()
        opened.wait_for_url(lambda url: "/auth/login" not in url)
        yield opened
        browser.close()


def tab(page: Page, server: ApiServer, path: str, link: str, shot: str) -> FrameLocator:
    """The plugin's page as the UI shows it: open ``path``, click its link to the plugin's ``link`` (a tab, or the
    navigation's entry), wait for the frame's heading; a screenshot of it."""
    page.goto(server.url(path))
    page.locator(f'a[href$="/plugin/{link}"]').first.click()
    frame = page.frame_locator("iframe")
    try:
        frame.locator("h1").wait_for()
    except PlaywrightError:
        page.screenshot(path=ARTIFACTS / f"{shot}-failed.png", full_page=True)
        raise AssertionError(f"no page in the frame at {page.url}: {[f.url for f in page.frames]}") from None
    page.screenshot(path=ARTIFACTS / f"{shot}.png", full_page=True)
    return frame


def test_the_dag_run_tab_shows_the_runs_cached_table_its_copy_and_each_tasks_use(page: Page, server: ApiServer) -> None:
    run_id = server.run_id("example_spark_cache")
    frame = tab(page, server, f"/dags/example_spark_cache/runs/{run_id}", "spark_tables_run", "dag_run_tab")
    assert frame.locator("h1").inner_text() == "Spark tables of this run"
    release = server.xcom("example_spark_cache", "release_caches")
    copies = frame.locator("table.copies tr").all_inner_texts()[1:]
    assert [row.split("\t")[0] for row in copies] == release["released"]["b"]
    assert all(row.split("\t")[-1] == "released" for row in copies)
    for row, was in zip(copies, release["removed_copies"], strict=True):  # the copy as it was before release
        assert row.split("\t")[1:5] == [
            was["written_by"],
            str(was["partitions"]),
            f"{was['rows']:,}",
            f"{was['bytes']:,}",
        ]
    definition = server.xcom("example_spark_cache", "max_b")["caches"]["b"]["definition"]
    assert frame.locator("pre.definition").inner_text() == definition
    uses = {row.split("\t")[0]: row.split("\t")[1] for row in frame.locator("table.uses tr").all_inner_texts()[1:]}
    for task_id in ("max_b", "min_b", "count_b", "normalise_b"):
        assert uses[task_id] == server.xcom("example_spark_cache", task_id)["caches"]["b"]["status"], task_id
    ctas = frame.locator("#ctas").inner_text()
    assert server.xcom("example_spark_cache", "make_a")["table"] in ctas


def test_the_task_tab_shows_the_tasks_spark_job(page: Page, server: ApiServer) -> None:
    run_id = server.run_id("example_spark_cache")
    frame = tab(page, server, f"/dags/example_spark_cache/runs/{run_id}/tasks/count_b", "spark_tables_task",
                "task_instance_tab")  # fmt: skip
    count_b = server.xcom("example_spark_cache", "count_b")
    job = frame.locator("#job").inner_text()
    assert count_b["application_id"] in job and count_b["spark_version"] in job
    assert frame.locator("#caches").inner_text().count(count_b["caches"]["b"]["status"]) >= 1
    assert json.loads(frame.locator("#output").inner_text())["rows"] == count_b["rows"]
    links = server.get(
        f"/api/v2/dags/example_spark_cache/dagRuns/{quote(run_id, safe='')}/taskInstances/count_b/links",
        server.token("bob"),
    ).json()["extra_links"]
    assert links["Spark job"] == task_tab_url("example_spark_cache", run_id, "count_b")  # the tab this test opened
    assert not links["Spark application"]  # the demo's local Spark connection names no history server


def test_the_lookup_run_tab_and_the_overview_show_the_lookup_tables_snapshot_and_hit_rates(
    page: Page, server: ApiServer
) -> None:
    run_id = server.run_id("example_spark_lookup")
    frame = tab(page, server, f"/dags/example_spark_lookup/runs/{run_id}", "spark_tables_run", "lookup_run_tab")
    partial = server.xcom("example_spark_lookup", "enrich_partial")
    lookups = frame.locator("#lookups").inner_text()
    assert f"{100 * partial['metrics']['hitRate']:.1f} %" in lookups
    assert frame.locator("svg.chart").count() == 1
    frame = tab(page, server, "/", "spark_tables", "overview")
    reload = server.xcom("example_spark_lookup", "reload")
    [row] = frame.locator("#lookup-tables tr").all_inner_texts()[1:]
    assert row.startswith(reload["lookup"]) and reload["snapshot"]["version"] in row
    due = server.xcom("example_spark_lookup", "wait_for_reload", RELOAD_DUE)["due"]
    assert f"was due {due}; reloaded since" in row, "the sensor's due time, which the reload after it met"
    assert "bytes of cached copies, with no quota" in frame.locator("#cache-storage").inner_text()
    assert [row.split("\t")[0] for row in frame.locator("#cached-tables tr").all_inner_texts()[1:]] == ["b"]
    assert frame.locator("svg.chart").count() >= 2
