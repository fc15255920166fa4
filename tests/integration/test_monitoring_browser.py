"""The monitoring pages in a real browser: Debian's chromium, driven by Playwright, on the API server of Airflow as
deployed (``cluster_airflow``) after its runs of the example DAGs (``cluster_examples``). A viewer logs in through
Airflow's login page, opens the DAG run's tab, a task's tab and the overview in the navigation, and finds there what
the runs' XComs hold. Screenshots go to ``SPARK_TABLES_TEST_ARTIFACTS`` (default
``.spark_tables/test-artifacts/monitoring``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import FrameLocator, Page, sync_playwright

from spark_tables.core.xcom_keys import RELOAD_DUE
from spark_tables.plugins.monitoring.summaries import run_label
from spark_tables.utils.monitoring_urls import task_tab_url
from tests.integration.airflow_services import AirflowServices
from tests.integration.conftest import REPO, ExampleRun

pytestmark = pytest.mark.integration

CHROMIUM = os.environ.get("SPARK_TABLES_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(
    os.environ.get("SPARK_TABLES_TEST_ARTIFACTS", REPO / ".spark_tables" / "test-artifacts" / "monitoring")
)
#: As the machine's notes say: without the background-networking flags, chromium keeps calling out.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]  # fmt: skip
#: The user who looks: a viewer, as most of the UI's users are.
VIEWER = "viewer"

Examples = dict[str, tuple[str, ExampleRun]]


@pytest.fixture(scope="module")
def page(cluster_airflow: AirflowServices) -> Iterator[Page]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        opened = browser.new_page(viewport={"width": 1400, "height": 1000})
        # Waits end on the event awaited; the bound is for a busy 2-core machine, where the UI's first load is slow.
        opened.set_default_timeout(120_000)
        opened.set_default_navigation_timeout(120_000)
        opened.goto(cluster_airflow.url("/"))
        opened.get_by_label("Username").fill(VIEWER)
        opened.get_by_label("Password").fill(cluster_airflow.password(VIEWER))
        opened.get_by_role("button", name="Sign in").click()
        opened.wait_for_url(lambda url: "/auth/login" not in url)
        yield opened
        browser.close()


def xcom(examples: Examples, dag_id: str, task_id: str) -> Any:
    """The return value of a task of the example's run."""
    return examples[dag_id][1].xcoms[task_id]


def tab(page: Page, airflow: AirflowServices, path: str, link: str, shot: str) -> FrameLocator:
    """The plugin's page as the UI shows it: open ``path``, click its link to the plugin's ``link`` (a tab, or the
    navigation's entry), wait for the frame's heading; a screenshot of it."""
    page.goto(airflow.url(path))
    page.locator(f'a[href$="/plugin/{link}"]').first.click()
    frame = page.frame_locator("iframe")
    try:
        frame.locator("h1").wait_for()
    except PlaywrightError:
        page.screenshot(path=ARTIFACTS / f"{shot}-failed.png", full_page=True)
        raise AssertionError(f"no page in the frame at {page.url}: {[f.url for f in page.frames]}") from None
    page.screenshot(path=ARTIFACTS / f"{shot}.png", full_page=True)
    return frame


def run_tab(
    page: Page, airflow: AirflowServices, examples: Examples, dag_id: str, shot: str
) -> tuple[str, FrameLocator]:
    """The Spark tables tab of the example's run: the run's id, and the tab's frame."""
    run_id = examples[dag_id][0]
    return run_id, tab(page, airflow, f"/dags/{dag_id}/runs/{run_id}", "spark_tables_run", shot)


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


def test_the_dag_run_tab_shows_the_runs_cached_table_its_copy_and_each_tasks_use(
    page: Page, cluster_airflow: AirflowServices, cluster_examples: Examples
) -> None:
    _, frame = run_tab(page, cluster_airflow, cluster_examples, "example_spark_cache", "dag_run_tab")
    assert frame.locator("h1").inner_text() == "Spark tables of this run"
    release = xcom(cluster_examples, "example_spark_cache", "release_caches")
    copies = [row.split("\t") for row in frame.locator("table.copies tr").all_inner_texts()[1:]]
    assert [row[0] for row in copies] == release["released"]["b"]
    assert all(row[5] == "released" for row in copies)
    for row, was in zip(copies, release["removed_copies"], strict=True):  # the copy as it was before release
        assert row[1:5] == [was["written_by"], str(was["partitions"]), f"{was['rows']:,}", f"{was['bytes']:,}"]
        readers = [t for t in ("max_b", "min_b", "normalise_b", "count_b") if t != was["written_by"]]
        computed, *reads, released = [line for line in row[6].splitlines() if line]
        assert computed == f"computed by {was['written_by']}: miss"
        assert sorted(reads) == sorted(f"read by {task}" for task in readers), "in the order they read it"
        assert released == "released by release_caches"
    # released is how a copy ends as it should: in the pages' muted grey, as their secondary text, not red
    assert colour(frame, "table.copies .state.released") == colour(frame, "p.where") != "rgb(198, 40, 40)"
    definition = xcom(cluster_examples, "example_spark_cache", "max_b")["caches"]["b"]["definition"]
    assert frame.locator("pre.definition").inner_text() == definition
    uses = {row.split("\t")[0]: row.split("\t")[1] for row in frame.locator("table.uses tr").all_inner_texts()[1:]}
    for task_id in ("max_b", "min_b", "count_b", "normalise_b"):
        assert uses[task_id] == xcom(cluster_examples, "example_spark_cache", task_id)["caches"]["b"]["status"]
    ctas = frame.locator("#ctas").inner_text()
    assert xcom(cluster_examples, "example_spark_cache", "make_a")["table"] in ctas
    assert frame.locator("body").evaluate(BROKEN_WORDS) == []


def test_the_task_tab_shows_the_tasks_spark_job(
    page: Page, cluster_airflow: AirflowServices, cluster_examples: Examples
) -> None:
    run_id = cluster_examples["example_spark_cache"][0]
    frame = tab(page, cluster_airflow, f"/dags/example_spark_cache/runs/{run_id}/tasks/count_b", "spark_tables_task",
                "task_instance_tab")  # fmt: skip
    count_b = xcom(cluster_examples, "example_spark_cache", "count_b")
    job = frame.locator("#job").inner_text()
    assert count_b["application_id"] in job and count_b["spark_version"] in job
    assert frame.locator("#caches").inner_text().count(count_b["caches"]["b"]["status"]) >= 1
    assert json.loads(frame.locator("#output").inner_text())["rows"] == count_b["rows"]
    links = cluster_airflow.api(
        "GET",
        f"/dags/example_spark_cache/dagRuns/{quote(run_id, safe='')}/taskInstances/count_b/links",
        token=cluster_airflow.token(VIEWER),
    )["extra_links"]
    assert links["Spark job"] == task_tab_url("example_spark_cache", run_id, "count_b")  # the tab this test opened
    assert not links["Spark application"]  # the cluster's Spark connection names no history server


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
    page: Page, cluster_airflow: AirflowServices, cluster_examples: Examples
) -> None:
    """The overview shows every DAG of this Airflow (the scenarios' too): what is checked is the examples' part."""
    run_id, frame = run_tab(page, cluster_airflow, cluster_examples, "example_spark_lookup", "lookup_run_tab")
    partial = xcom(cluster_examples, "example_spark_lookup", "enrich_partial")
    lookups = frame.locator("#lookups").inner_text()
    assert f"{100 * partial['metrics']['hitRate']:.1f} %" in lookups
    assert frame.locator("svg.chart").count() == 1
    bars = chart_bars(frame, "Hit rate of each lookup join of this run (%), by cache mode")
    modes = {mode: fill for mode, fill in legend(frame, "Hit rate of each lookup join of this run (%), by cache mode")}
    assert sorted(label for label, _, _ in bars) == [
        "enrich_full (FULL)",
        "enrich_none (NONE)",
        "enrich_partial (PARTIAL)",
        "enrich_segments (FULL)",
    ]
    segments = xcom(cluster_examples, "example_spark_lookup", "reload_segments")["snapshot"]["table_version"]
    assert lookups.count(f"table version {segments['number']}") == 3, "the segments' reload, join and check"
    assert "table unchanged, snapshot" in lookups, "the check that found the Delta table unchanged"
    assert len(set(modes.values())) == 3 and all(fill == modes[label.split("(")[1][:-1]] for label, _, fill in bars)
    assert frame.locator("body").evaluate(BROKEN_WORDS) == []
    frame.locator("svg.chart").scroll_into_view_if_needed()  # the screenshot shows the joins' table and chart
    page.screenshot(path=ARTIFACTS / "lookup_run_tab.png", full_page=True)

    frame = tab(page, cluster_airflow, "/", "spark_tables", "overview")
    reload = xcom(cluster_examples, "example_spark_lookup", "reload")
    assert frame.locator("#lookup-tables th").all_inner_texts()[:2] == ["DAG", "table"]
    rows = frame.locator("#lookup-tables tr").all_inner_texts()[1:]
    [row] = [row for row in rows if row.startswith(f"example_spark_lookup\t{reload['lookup']}")]
    [segments_row] = [row for row in rows if row.startswith("example_spark_lookup\tdemo_segments")]
    assert f"table version {segments['number']}" in segments_row and "table unchanged" in segments_row
    assert row.startswith(f"example_spark_lookup\t{reload['lookup']}") and reload["snapshot"]["version"] in row
    assert reload["lookup_definition"] in row
    due = cluster_airflow.xcom("example_spark_lookup", run_id, "wait_for_reload", RELOAD_DUE)["due"]
    assert f"was due {due[:10]} {due[11:19]}; reloaded since" in row, "the sensor's due time, which the reload met"
    assert "bytes of cached copies, with no quota" in frame.locator("#cache-storage").inner_text()
    cached = [row.split("\t")[:2] for row in frame.locator("#cached-tables tr").all_inner_texts()[1:]]
    assert [table for table in cached if table[0].startswith("example_")] == [["example_spark_cache", "b"]]
    # every bar of the hit-rate chart names its run and its cache mode, which its colour keys in the legend
    title = "example_spark_lookup · demo_customers: hit rate of its recent joins (%), by run and cache mode"
    bars, modes = chart_bars(frame, title), dict(legend(frame, title))
    assert sorted(modes) == ["FULL", "NONE", "PARTIAL"] and len(set(modes.values())) == 3
    assert len({label for label, _, _ in bars}) == len(bars) == 3, "no two bars look the same"
    for label, _, fill in bars:
        assert label.startswith(run_label(run_id)) and fill == modes[label.rsplit(" · ", 1)[1]], label
    recompute_read = legend(
        frame,
        "Cached tables: mean recompute time against mean read time, from files and from a server's memory (s), by DAG",
    )
    assert [name for name, _ in recompute_read] == ["recompute", "read from files", "read from memory"]
    assert len(set(dict(recompute_read).values())) == 3, "each series its own colour"
    assert frame.locator("body").evaluate(BROKEN_WORDS) == []
