"""The monitoring plugin on a real API server: loaded from the provider's entry point, every endpoint behind
Airflow's authentication and the DAG's authorisation, showing what the runs' XComs hold and no secret."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from markupsafe import escape

from spark_tables.core.cache.layout import run_folder
from spark_tables.core.xcom_keys import FAILED_TRY, RELOAD_DUE
from spark_tables.tasks.cache import storage
from tests.integration.monitoring_dags.monitored import FAILED_CTAS, MISSING_CONNECTION
from tests.integration.monitoring_server import SECRET, ApiServer, api_server

pytestmark = pytest.mark.integration

DAGS = Path(__file__).with_name("monitoring_dags")


#: The server runs under a base URL with a path, as behind a proxy: every link must carry it.
BASE = "/airflow"
#: Cached copies under the cache root for the overview's storage, by DAG: (copies, bytes each).
STORED = {"monitored": (2, 300_000), "secret_monitored": (1, 500_000)}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    home = tmp_path_factory.mktemp("airflow-monitoring")
    quota = {"AIRFLOW__SPARK_TABLES__CACHE_QUOTA": "2 MB"}
    dags, failing = ["monitored", "secret_monitored"], ("secret_monitored",)
    with api_server(home, DAGS, dags, base_path=BASE, failing=failing, **quota) as served:
        cache_root = (home / "spark_tables" / "cache").as_uri()
        for dag_id, (copies, size) in STORED.items():
            run = run_folder(cache_root, dag_id, served.run_id(dag_id))
            storage.mark_run(run, dag_id, served.run_id(dag_id))
            for number in range(copies):
                copy = Path(run.removeprefix("file://")) / "b-f32b" / f"copy_{number}"
                copy.mkdir(parents=True)
                (copy / "part-0.parquet").write_bytes(b"x" * size)
        yield served


@pytest.fixture(scope="module")
def tokens(server: ApiServer) -> dict[str, str]:
    return {user: server.token(user) for user in ("alice", "bob", "carol")}


def run_url(server: ApiServer, dag_id: str, api: bool = True) -> str:
    prefix = "/spark-tables/api" if api else "/spark-tables"
    return f"{prefix}/dags/{dag_id}/runs/{quote(server.run_id(dag_id), safe='')}"


def endpoints(server: ApiServer, dag_id: str) -> list[str]:
    run, page = run_url(server, dag_id), run_url(server, dag_id, api=False)
    task = "enrich_secret" if dag_id == "secret_monitored" else "make_b"
    return [run, f"{run}/tasks/{task}?map_index=-1", page, f"{page}/tasks/{task}?map_index=-1"]


def test_the_plugin_is_loaded_from_the_entry_point_with_its_tabs(server: ApiServer, tokens: dict[str, str]) -> None:
    plugins = server.get("/api/v2/plugins", tokens["alice"]).json()["plugins"]
    [plugin] = [plugin for plugin in plugins if plugin["name"] == "spark_tables"]
    assert plugin["source"].startswith("airflow-provider-spark-tables==")  # the installed distribution's entry point
    assert (
        "value='spark_tables.plugins.monitoring.plugin:SparkTablesPlugin', group='airflow.plugins'"
        in (plugin["source"])
    )
    views = {view["destination"]: view["href"] for view in plugin["external_views"]}
    assert views == {  # the UI loads them as they are: under the base URL's path
        "dag_run": "/airflow/spark-tables/dags/{DAG_ID}/runs/{RUN_ID}",
        "task_instance": "/airflow/spark-tables/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}?map_index={MAP_INDEX}",
        "nav": "/airflow/spark-tables/overview",
    }
    assert [app["url_prefix"] for app in plugin["fastapi_apps"]] == ["/spark-tables"]


def test_every_endpoint_refuses_a_request_without_a_token_or_with_a_bad_one(server: ApiServer) -> None:
    for path in [*endpoints(server, "monitored"), "/spark-tables/api/overview", "/spark-tables/overview"]:
        assert server.get(path).status == 401, path
        assert server.get(path, token="not-a-token").status == 403, path


def test_the_run_tab_shows_the_runs_cached_tables_ctas_tables_lookups_and_jobs(
    server: ApiServer, tokens: dict[str, str]
) -> None:
    summary = server.get(run_url(server, "monitored"), tokens["alice"]).json()
    [cache] = summary["caches"]
    make_b = server.xcom("monitored", "make_b")["caches"]["b"]
    assert (cache["name"], cache["definition"]) == ("b", make_b["definition"])
    [released] = server.xcom("monitored", "release_caches")["removed_copies"]
    assert [(c["location"], c["written_by"], c["state"], c["rows"], c["bytes"]) for c in cache["copies"]] == [
        (make_b["location"], "make_b", "released", released["rows"], released["bytes"])
    ], "a released copy as it was, though its registry entry is gone"
    assert [(e["event"], e["task_id"]) for e in cache["copies"][0]["events"]] == [
        ("computed", "make_b"),
        ("read", "read_b"),
        ("released", "release_caches"),
    ]
    assert [(use["task_id"], use["status"]) for use in cache["uses"]] == [("make_b", "miss"), ("read_b", "hit")]
    assert (cache["hits"], cache["misses"], cache["fallbacks"]) == (1, 1, 0)
    ctas, failed = summary["ctas"]
    snapshot = server.xcom("monitored", "snapshot_orders")
    assert (ctas["table"], ctas["created"], ctas["rows"]) == (snapshot["table"], True, snapshot["rows"])
    report = server.xcom("monitored", "failed_ctas", FAILED_TRY)
    assert (failed["task_id"], failed["table"]) == ("failed_ctas", report["table"])
    assert failed["steps"] == [f"try 1 failed: {report['error']}", f"undone by the job: {report['undone'][0]}"]
    assert [(lookup["task_id"], lookup["kind"], lookup["lookup"]) for lookup in summary["lookups"]] == [
        ("enrich_partial", "join", "customers"),
        ("reload", "reload", "customers"),
        ("enrich_mapped", "join", "customers"),
        ("enrich_mapped", "join", "customers"),
    ]
    assert summary["lookups"][0]["metrics"] == server.xcom("monitored", "enrich_partial")["metrics"]
    jobs = {(job["task_id"], job["map_index"]): job for job in summary["jobs"]}
    assert set(jobs) == {
        *((task, -1) for task in ("snapshot_orders", "make_b", "read_b", "enrich_partial", "reload", "explain")),
        ("failed_ctas", -1),
        ("enrich_mapped", 0),
        ("enrich_mapped", 1),
    }
    assert jobs["failed_ctas", -1]["failure"] == {"try_number": 1, "error": report["error"], "cleanup": None}


def test_the_task_tab_shows_the_tasks_job_and_cache_use(server: ApiServer, tokens: dict[str, str]) -> None:
    summary = server.get(f"{run_url(server, 'monitored')}/tasks/read_b?map_index=-1", tokens["alice"]).json()
    read_b = server.xcom("monitored", "read_b")
    assert summary["job"]["application_id"] == read_b["application_id"]
    assert summary["output"] == {"statements_run": 1, "rows": [[2000000]], "columns": ["rows"]}
    assert [(use["name"], use["status"], use["bytes_read"]) for use in summary["caches"]] == [
        ("b", "hit", read_b["caches"]["b"]["bytes_read"])
    ]


def test_a_mapped_task_instance_has_its_own_tab_and_extra_links(server: ApiServer, tokens: dict[str, str]) -> None:
    run_id = server.run_id("monitored")
    for index in (0, 1):
        summary = server.get(f"{run_url(server, 'monitored')}/tasks/enrich_mapped?map_index={index}", tokens["bob"])
        mapped = server.xcom("monitored", "enrich_mapped", map_index=index)
        assert summary.json()["job"]["application_id"] == mapped["application_id"], index
        assert summary.json()["lookup"]["metrics"] == mapped["metrics"], index
    links = server.get(
        f"/api/v2/dags/monitored/dagRuns/{quote(run_id, safe='')}/taskInstances/enrich_mapped/links?map_index=1",
        tokens["bob"],
    ).json()["extra_links"]
    run_path = f"/dags/monitored/runs/{quote(run_id, safe='')}"
    assert links == {
        "Spark job": f"{BASE}{run_path}/tasks/enrich_mapped/mapped/1/plugin/spark_tables_task",
        "Spark application": mapped["application_url"],
    }
    page = server.get(f"{run_url(server, 'monitored', api=False)}/tasks/enrich_mapped?map_index=1", tokens["bob"])
    assert "enrich_mapped [1]" in page.body and f'href="{mapped["application_url"]}"' in page.body


def test_the_task_tab_of_a_failed_try_shows_its_error_and_its_ctas_table_step_by_step(
    server: ApiServer, tokens: dict[str, str]
) -> None:
    report = server.xcom("monitored", "failed_ctas", FAILED_TRY)
    page = server.get(f"{run_url(server, 'monitored', api=False)}/tasks/failed_ctas?map_index=-1", tokens["bob"])
    assert page.status == 200
    for shown in ("try 1 failed", "Division by zero", "undone by the job: dropped the unfinished order_totals"):
        assert shown in page.body, shown
    assert report["application_id"] in page.body


def test_the_task_tab_of_an_explain_draws_the_plan_with_each_operators_state_ttl(
    server: ApiServer, tokens: dict[str, str]
) -> None:
    page = server.get(f"{run_url(server, 'monitored', api=False)}/tasks/explain?map_index=-1", tokens["bob"]).body
    assert '<svg class="chart plan"' in page
    assert page.count('<g class="node') == 3 and "groupAggregateState TTL 7 d" in page


def test_a_user_denied_a_dag_sees_nothing_of_it(server: ApiServer, tokens: dict[str, str]) -> None:
    for path in endpoints(server, "secret_monitored"):
        assert server.get(path, tokens["bob"]).status == 403, path
        assert server.get(path, tokens["alice"]).status == 200, path
    for path in endpoints(server, "monitored"):
        assert server.get(path, tokens["bob"]).status == 200, path
    for user, visible in (("bob", {"customers"}), ("alice", {"customers", "secret_customers"})):
        overview = server.get("/spark-tables/api/overview", tokens[user]).json()
        assert {table["name"] for table in overview["lookups"]} == visible
        page = server.get("/spark-tables/overview", tokens[user]).body
        assert ("secret_customers" in page) == (user == "alice")


def test_a_user_who_may_read_a_dag_but_not_its_xcoms_sees_nothing_the_xcoms_hold(
    server: ApiServer, tokens: dict[str, str]
) -> None:
    """carol may read secret_monitored, not its XComs: the run and task tabs refuse her, and the overview shows none
    of its cached tables' definitions, lookups, failed tries' errors or copies, as for bob, who may not read it."""
    for path in endpoints(server, "secret_monitored"):
        assert server.get(path, tokens["carol"]).status == 403, path
    carol = server.get("/spark-tables/api/overview?days=3", tokens["carol"]).json()
    bob = server.get("/spark-tables/api/overview?days=3", tokens["bob"]).json()
    for key in ("dag_ids", "caches", "lookups", "failed_tries", "ctas_undone"):
        assert carol[key] == bob[key], key
    assert {run["dag_id"] for run in carol["cache_storage"]["runs"]} == {"monitored"}
    page = server.get("/spark-tables/overview?days=3", tokens["carol"]).body
    assert "secret_customers" not in page and "secret.customers" not in page


def test_the_overview_sums_up_lookups_and_cached_tables_across_runs(server: ApiServer, tokens: dict[str, str]) -> None:
    overview = server.get("/spark-tables/api/overview?days=3", tokens["bob"]).json()
    [customers] = overview["lookups"]
    assert customers["modes"] == ["PARTIAL"]
    assert customers["last_reload"]["snapshot"] == server.xcom("monitored", "reload")["snapshot"]
    assert sorted(join["hit_rate"] for join in customers["joins"]) == [0.5, 0.75, 0.89]  # the mapped ones too
    assert customers["next_reload"]["due"] == server.xcom("monitored", "wait_for_reload", RELOAD_DUE)["due"]
    assert customers["next_reload"]["failing"] == 1
    [cache] = overview["caches"]
    assert (cache["mean_recompute_seconds"], cache["mean_file_read_seconds"]) == (6.5, 1.1)
    assert (cache["memory_reads"], cache["mean_memory_read_seconds"]) == ([], None)  # no session-mode reads here
    assert [(f["task_id"], f["try_number"]) for f in overview["failed_tries"]] == [("failed_ctas", 1)]
    assert "dropped the unfinished order_totals of try 1" in [u["undone"] for u in overview["ctas_undone"]]
    assert overview["truncated"] is False
    assert server.get("/spark-tables/api/overview?days=0", tokens["bob"]).status == 422


def test_the_overview_keeps_each_dags_tables_apart_and_lists_every_failed_try(
    server: ApiServer, tokens: dict[str, str]
) -> None:
    """Both DAGs have a cached table b and a lookup table customers, each of its own definition: a row each, with
    its DAG. A Spark job task of secret_monitored failed before Spark started (no connection): its try is listed with
    its one-line error, to alice, who may read that DAG; not to bob."""
    overview = server.get("/spark-tables/api/overview?days=3", tokens["alice"]).json()
    assert [(t["dag_id"], t["name"], t["fingerprint"]) for t in overview["caches"]] == [
        ("monitored", "b", "f32b7e440af5ed59"),
        ("secret_monitored", "b", "0123456789abcdef"),
    ]
    assert [(t["dag_id"], t["name"], t["definition"]) for t in overview["lookups"]] == [
        ("monitored", "customers", None),  # results of an earlier release name no definition
        ("secret_monitored", "customers", "secret.customers on connection secret_crm, key id"),
        ("secret_monitored", "secret_customers", None),
    ]
    report = server.xcom("secret_monitored", "no_connection", FAILED_TRY)
    assert f"Spark connection '{MISSING_CONNECTION}' does not exist" in report["error"]
    failed = [(f["dag_id"], f["task_id"], f["try_number"], f["error"]) for f in overview["failed_tries"]]
    assert failed == [
        ("secret_monitored", "no_connection", 1, report["error"]),
        ("monitored", "failed_ctas", 1, FAILED_CTAS["error"]),
    ]
    page = server.get("/spark-tables/overview?days=3", tokens["alice"]).body
    assert str(escape(report["error"])) in page and "<th>DAG</th><th>table</th><th>definition</th>" in page
    bob = server.get("/spark-tables/api/overview?days=3", tokens["bob"]).json()
    assert [f["dag_id"] for f in bob["failed_tries"]] == ["monitored"]


def test_the_overview_shows_cache_storage_against_its_quota_of_readable_dags_only(
    server: ApiServer, tokens: dict[str, str]
) -> None:
    total = sum(copies * size for copies, size in STORED.values())
    for user, readable in (("bob", {"monitored"}), ("alice", {"monitored", "secret_monitored"})):
        use = server.get("/spark-tables/api/overview", tokens[user]).json()["cache_storage"]
        assert (use["error"], use["used"], use["quota"], use["share"]) == (None, total, 2_000_000, total / 2_000_000)
        assert {(run["dag_id"], run["copies"], run["bytes"]) for run in use["runs"]} == {
            (dag_id, STORED[dag_id][0], STORED[dag_id][0] * STORED[dag_id][1]) for dag_id in readable
        }
        assert use["other_bytes"] == total - sum(STORED[d][0] * STORED[d][1] for d in readable)
    page = server.get("/spark-tables/overview", tokens["bob"]).body
    assert f"{total:,} bytes of cached copies against a quota of 2,000,000 bytes (55.0 %)" in page


def test_pages_authenticate_with_the_uis_cookie_and_show_the_xcoms(server: ApiServer, tokens: dict[str, str]) -> None:
    page = server.get(run_url(server, "monitored", api=False), cookie=tokens["bob"])
    assert page.status == 200 and page.content_type.startswith("text/html")
    for shown in ("order_snapshot_20261125", "released", "customers", "v-20261125T171238366365-0b1f79af", "89.0 %"):
        assert shown in page.body, shown
    assert "<svg" in page.body  # the hit rate chart
    task = server.get(f"{run_url(server, 'monitored', api=False)}/tasks/make_b?map_index=-1", cookie=tokens["bob"])
    assert "local-1795626744057" in task.body and "1,368,855" in task.body
    css = server.get("/spark-tables/static/spark_tables.css")
    assert css.status == 200 and css.content_type.startswith("text/css")
    read_b = f"{BASE}/spark-tables/dags/monitored/runs/{quote(server.run_id('monitored'), safe='')}/tasks/read_b"
    assert f'href="{read_b}?map_index=-1"' in page.body, "links within the pages carry the base URL's path"
    assert f'href="{BASE}/spark-tables/static/spark_tables.css"' in page.body


def test_no_page_shows_a_connection_password(server: ApiServer, tokens: dict[str, str]) -> None:
    paths = [
        *endpoints(server, "monitored"),
        *endpoints(server, "secret_monitored"),
        "/spark-tables/overview",
        "/spark-tables/api/overview",
    ]
    bodies = [server.get(path, tokens["alice"]).body for path in paths]
    assert all(bodies)
    assert not [path for path, body in zip(paths, bodies, strict=True) if SECRET in body]
