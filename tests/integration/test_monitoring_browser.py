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
from spark_tables.plugins.monitoring.summaries import run_label
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


#: The texts the browser broke over lines although each must stay whole: numbers with their units, times, states,
#: names, the pieces of a path (which may break only between them) and codes of one word.
BROKEN_WORDS = """() => [...document.querySelectorAll(
        'td.n, td.name, .when, .state, .piece, td code:not(:has(.piece))')]
    .filter(e => !(e.tagName === 'CODE' && /\\s/.test(e.textContent.trim())))
    .filter(e => {
        const range = document.createRange();
        range.selectNodeContents(e);
        const tops = [...range.getClientRects()].map(rect => rect.top).sort((a, b) => a - b);
        return tops.some((top, i) => i > 0 && top - tops[i - 1] > 8);
    })
    .map(e => e.textContent)"""


def colour(frame: FrameLocator, selector: str) -> str:
    return frame.locator(selector).first.evaluate("e => getComputedStyle(e).color")


def test_the_dag_run_tab_shows_the_runs_cached_table_its_copy_and_each_tasks_use(page: Page, server: ApiServer) -> None:
    run_id = server.run_id("example_spark_cache")
    frame = tab(page, server, f"/dags/example_spark_cache/runs/{run_id}", "spark_tables_run", "dag_run_tab")
    assert frame.locator("h1").inner_text() == "Spark tables of this run"
    release = server.xcom("example_spark_cache", "release_caches")
    copies = [row.split("\t") for row in frame.locator("table.copies tr").all_inner_texts()[1:]]
    assert [row[0] for row in copies] == release["released"]["b"]
    assert all(row[5] == "released" for row in copies)
    for row, was in zip(copies, release["removed_copies"], strict=True):  # the copy as it was before release
        assert row[1:5] == [was["written_by"], str(was["partitions"]), f"{was['rows']:,}", f"{was['bytes']:,}"]
        readers = [t for t in ("max_b", "min_b", "normalise_b", "count_b") if t != was["written_by"]]
        assert [line for line in row[6].splitlines() if line] == [
            f"computed by {was['written_by']}: miss",
            *(f"read by {task}" for task in readers),
            "released by release_caches",
        ]
    # released is how a copy ends as it should: in the pages' muted grey, as their secondary text, not red
    assert colour(frame, "table.copies .state.released") == colour(frame, "p.where") != "rgb(198, 40, 40)"
    definition = server.xcom("example_spark_cache", "max_b")["caches"]["b"]["definition"]
    assert frame.locator("pre.definition").inner_text() == definition
    uses = {row.split("\t")[0]: row.split("\t")[1] for row in frame.locator("table.uses tr").all_inner_texts()[1:]}
    for task_id in ("max_b", "min_b", "count_b", "normalise_b"):
        assert uses[task_id] == server.xcom("example_spark_cache", task_id)["caches"]["b"]["status"], task_id
    ctas = frame.locator("#ctas").inner_text()
    assert server.xcom("example_spark_cache", "make_a")["table"] in ctas
    assert frame.locator("body").evaluate(BROKEN_WORDS) == []


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


def chart_bars(frame: FrameLocator, title: str) -> list[tuple[str, str, str]]:
    """Each bar of the chart titled ``title``: its label, its tooltip and its colour; and the chart's legend."""
    chart = frame.locator("svg.chart", has=frame.locator(f"title:text-is({json.dumps(title, ensure_ascii=False)})"))
    return chart.evaluate(
        """svg => [...svg.querySelectorAll(':scope > rect.bar')].map((bar, i) => [
            svg.querySelectorAll('text.label')[i].textContent, bar.querySelector('title').textContent,
            getComputedStyle(bar).fill])"""
    )


def legend(frame: FrameLocator, title: str) -> list[tuple[str, str]]:
    """The legend of the chart titled ``title``: each key's name and colour."""
    chart = frame.locator("svg.chart", has=frame.locator(f"title:text-is({json.dumps(title, ensure_ascii=False)})"))
    return chart.evaluate(
        """svg => [...svg.querySelectorAll('g.legend rect')].map(swatch => [
            swatch.nextElementSibling.textContent, getComputedStyle(swatch).fill])"""
    )


def test_the_lookup_run_tab_and_the_overview_show_the_lookup_tables_snapshot_and_hit_rates(
    page: Page, server: ApiServer
) -> None:
    run_id = server.run_id("example_spark_lookup")
    frame = tab(page, server, f"/dags/example_spark_lookup/runs/{run_id}", "spark_tables_run", "lookup_run_tab")
    partial = server.xcom("example_spark_lookup", "enrich_partial")
    lookups = frame.locator("#lookups").inner_text()
    assert f"{100 * partial['metrics']['hitRate']:.1f} %" in lookups
    assert frame.locator("svg.chart").count() == 1
    bars = chart_bars(frame, "Hit rate of each lookup join of this run (%), by cache mode")
    modes = {mode: fill for mode, fill in legend(frame, "Hit rate of each lookup join of this run (%), by cache mode")}
    assert sorted(label for label, _, _ in bars) == [
        "enrich_full (FULL)",
        "enrich_none (NONE)",
        "enrich_partial (PARTIAL)",
    ]
    assert len(set(modes.values())) == 3 and all(fill == modes[label.split("(")[1][:-1]] for label, _, fill in bars)
    assert frame.locator("body").evaluate(BROKEN_WORDS) == []
    frame.locator("svg.chart").scroll_into_view_if_needed()  # the screenshot shows the joins' table and chart
    page.screenshot(path=ARTIFACTS / "lookup_run_tab.png", full_page=True)

    frame = tab(page, server, "/", "spark_tables", "overview")
    reload = server.xcom("example_spark_lookup", "reload")
    assert frame.locator("#lookup-tables th").all_inner_texts()[:2] == ["DAG", "table"]
    [row] = frame.locator("#lookup-tables tr").all_inner_texts()[1:]
    assert row.startswith(f"example_spark_lookup\t{reload['lookup']}") and reload["snapshot"]["version"] in row
    assert reload["lookup_definition"] in row
    due = server.xcom("example_spark_lookup", "wait_for_reload", RELOAD_DUE)["due"]
    assert f"was due {due[:10]} {due[11:19]}; reloaded since" in row, "the sensor's due time, which the reload met"
    assert "bytes of cached copies, with no quota" in frame.locator("#cache-storage").inner_text()
    cached = [row.split("\t")[:2] for row in frame.locator("#cached-tables tr").all_inner_texts()[1:]]
    assert cached == [["example_spark_cache", "b"]]
    # every bar of the hit-rate chart names its run and its cache mode, which its colour keys in the legend
    title = "example_spark_lookup · demo_customers: hit rate of its recent joins (%), by run and cache mode"
    bars, modes = chart_bars(frame, title), dict(legend(frame, title))
    assert sorted(modes) == ["FULL", "NONE", "PARTIAL"] and len(set(modes.values())) == 3
    assert len({label for label, _, _ in bars}) == len(bars) == 3, "no two bars look the same"
    for label, _, fill in bars:
        assert label.startswith(run_label(run_id)) and fill == modes[label.rsplit(" · ", 1)[1]], label
    recompute_read = legend(frame, "Cached tables: mean recompute time against mean read time (s), by DAG")
    assert [name for name, _ in recompute_read] == ["recompute", "read"] and len(
        set(dict(recompute_read).values())
    ) == 2
    assert frame.locator("body").evaluate(BROKEN_WORDS) == []
