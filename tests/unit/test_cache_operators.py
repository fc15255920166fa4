"""Operators and cached tables: what a task's job is told, what it records, invalidation and the run's release.

No Spark: ``SparkJobHook.run`` is replaced by a fake that answers with a job result; XComs live in memory.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.providers.common.compat.sdk import AirflowFailException
from airflow.sdk import DAG

from spark_tables.core.cache.layout import run_folder
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.hooks.spark_job import SparkJobFailed, SparkJobHook
from spark_tables.operators.cache import SparkCacheInvalidateOperator, SparkCacheReleaseOperator, release_caches
from spark_tables.operators.sql import SparkSqlJobOperator
from spark_tables.tasks.cache import registry as cache_registry
from spark_tables.utils import settings
from tests.unit.test_cache_registry import InMemoryXCom, written_report

pytestmark = pytest.mark.usefixtures("spark_tables_home")

RUN = "manual__2026-11-22T10:00:00+00:00"
B_QUERY = "SELECT k, max(h) AS h FROM a WHERE ds = '{{ ds }}' GROUP BY k"


@pytest.fixture(autouse=True)
def xcom(monkeypatch) -> type[InMemoryXCom]:
    monkeypatch.setattr(InMemoryXCom, "rows", {})
    monkeypatch.setattr(cache_registry, "XCom", InMemoryXCom)
    return InMemoryXCom


def flip36(**b_fields: Any) -> DAG:
    """The FLIP's program: two consumers of b, an invalidation, and the release."""
    b = CachedTable("b", query=B_QUERY, **b_fields)
    with DAG("flip36", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")) as dag:
        first = SparkSqlJobOperator(task_id="max_b", sql="SELECT max(h) FROM b", caches=[b])
        second = SparkSqlJobOperator(task_id="min_b", sql="SELECT min(h) FROM b", caches=[b])
        forget = SparkCacheInvalidateOperator(task_id="forget_b", caches=[b])
        first >> second >> forget
        release_caches()
    return dag


def context(dag: DAG, task_id: str, pulled: dict[str, Any] | None = None) -> dict[str, Any]:
    def xcom_pull(task_ids: list[str]) -> list[Any]:
        return [(pulled or {}).get(task_id) for task_id in task_ids]

    ti = SimpleNamespace(
        dag_id=dag.dag_id,
        run_id=RUN,
        task_id=task_id,
        map_index=-1,
        try_number=1,
        xcom_pull=xcom_pull,
        pushed={},
        stats_tags={},
    )
    ti.get_dr_count = lambda dag_id, run_ids, states: 1
    ti.xcom_push = lambda key, value: ti.pushed.__setitem__(key, value)
    return {"ti": ti, "dag": dag, "ds": "2026-11-22", "task": dag.get_task(task_id)}


class FakeJobs:
    """Stands in for spark-submit: records each spec, writes the copy a miss would write, answers a result."""

    def __init__(self, error: str | None = None) -> None:
        self.specs: list[Any] = []
        self.error = error

    def __call__(self, hook: SparkJobHook) -> JobResult:
        spec = hook._spec
        self.specs.append(spec)
        caches = {}
        for use in spec.caches:
            if use.registered:
                copy = use.registered[0]
                caches[use.table.name] = {
                    "status": "hit", "location": copy.location, "damaged": [], "unchecked": [],
                    "bytes_read": copy.bytes, "bytes_written": 0, "seconds": 0.1,
                }  # fmt: skip
            else:
                caches[use.table.name] = written_report(use.location)
        hook.last_result = JobResult(kind="sql", output={"rows": [[1]]}, caches=caches, error=self.error)
        if self.error:
            raise SparkJobFailed(self.error)
        return hook.last_result


@pytest.fixture
def jobs(monkeypatch) -> FakeJobs:
    fake = FakeJobs()
    monkeypatch.setattr(SparkJobHook, "run", lambda hook: fake(hook))
    return fake


def run_task(dag: DAG, task_id: str) -> dict[str, Any]:
    return dag.get_task(task_id).execute(context(dag, task_id))


class TestJobOperatorsWithCaches:
    def test_caches_must_be_declarations(self):
        with pytest.raises(TypeError, match="CachedTable declarations, not str"):
            SparkSqlJobOperator(task_id="t", sql="SELECT 1", caches=["b"])

    def test_the_first_task_is_told_to_compute_b_and_the_second_to_read_the_first_s_copy(self, jobs):
        dag = flip36()

        first, second = run_task(dag, "max_b"), run_task(dag, "min_b")

        [miss], [hit] = (spec.caches for spec in jobs.specs)
        assert miss.registered == () and hit.registered[0].location == miss.location
        assert (first["caches"]["b"]["misses"], second["caches"]["b"]["hits"]) == (1, 1)
        assert first["cache_evictions"] == [] and first["rows"] == [[1]]

    def test_a_job_reading_cached_tables_shares_the_cache_root_with_its_executors(self, jobs, spark_tables_home):
        run_task(flip36(), "max_b")

        assert jobs.specs[0].shared_folders == {"[spark_tables] cache_uri": f"file://{spark_tables_home}/cache"}

    def test_the_query_of_a_cached_table_is_rendered_for_the_task(self, jobs):
        run_task(flip36(), "max_b")

        assert jobs.specs[0].caches[0].table.query == B_QUERY.replace("{{ ds }}", "2026-11-22")

    def test_a_cached_view_in_the_sql_is_a_cached_table_not_a_statement(self, jobs):
        with DAG("sql_form", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")) as dag:
            SparkSqlJobOperator(
                task_id="count_b", sql=f"CREATE TEMPORARY VIEW b CACHED AS {B_QUERY}; SELECT count(*) FROM b"
            )

        run_task(dag, "count_b")

        [spec] = jobs.specs
        assert [statement.text for statement in spec.job.statements] == ["SELECT count(*) FROM b"]
        assert [use.table.name for use in spec.caches] == ["b"]

    def test_a_copy_written_by_a_job_that_then_failed_is_still_registered(self, jobs):
        jobs.error = "statement 2/2 failed: boom"
        dag = flip36()

        with pytest.raises(SparkJobFailed, match="boom"):
            run_task(dag, "max_b")

        [copy] = cache_registry.registered(context(dag, "min_b")["ti"], "b", ["max_b", "min_b"])
        assert Path(copy.location.removeprefix("file://")).exists()

    def test_a_task_without_caches_needs_no_backend(self, jobs, monkeypatch):
        from airflow.sdk import BaseXCom

        monkeypatch.setattr(cache_registry, "XCom", BaseXCom)
        with DAG("plain", schedule=None, start_date=pendulum.datetime(2026, 11, 1, tz="UTC")) as dag:
            SparkSqlJobOperator(task_id="q", sql="SELECT 1")

        assert "caches" not in run_task(dag, "q")

    def test_without_the_backend_a_cache_user_fails_before_any_job(self, jobs, monkeypatch):
        from airflow.sdk import BaseXCom

        monkeypatch.setattr(cache_registry, "XCom", BaseXCom)
        dag = flip36()
        task_context = context(dag, "max_b")

        with pytest.raises(AirflowFailException, match="xcom_backend") as caught:
            dag.get_task("max_b").execute(task_context)
        assert jobs.specs == []
        report = task_context["ti"].pushed[FAILED_TRY]
        assert (report["try_number"], report["error"]) == (1, str(caught.value)), "the try's report, for the pages"


class TestInvalidateAndRelease:
    def test_invalidating_removes_every_copy_and_the_next_use_computes_again(self, jobs):
        dag = flip36()
        run_task(dag, "max_b")
        location = jobs.specs[0].caches[0].location

        invalidated = run_task(dag, "forget_b")
        run_task(dag, "min_b")

        assert invalidated["invalidated"] == {"b": [location]}
        [removed] = invalidated["removed_copies"]
        assert removed == {
            "name": "b",
            "location": location,
            "rows": 1,
            "bytes": 10,
            "partitions": 1,
            "written_by": "max_b",
            "written_at": removed["written_at"],
        }, "the copy as it was: its registry entry is gone with it"
        assert not Path(location.removeprefix("file://")).exists()
        assert jobs.specs[1].caches[0].registered == (), "after invalidation the next use computes b again"

    def test_release_removes_the_run_s_caches_and_sums_their_use(self, jobs):
        dag = flip36()
        outputs = {task: run_task(dag, task) for task in ("max_b", "min_b")}
        run = Path(run_folder(settings.cache_uri(), "flip36", RUN).removeprefix("file://"))
        assert run.exists()

        released = dag.get_task("release_caches").execute(context(dag, "release_caches", outputs))

        assert list(released["released"]) == ["b"] and len(released["released"]["b"]) == 1
        [removed] = released["removed_copies"]
        assert (removed["location"], removed["rows"], removed["bytes"]) == (released["released"]["b"][0], 1, 10)
        assert released["usage"]["b"] == {
            "hits": 1,
            "misses": 1,
            "fallbacks": 0,
            "bytes_read": 10,
            "bytes_written": 10,
        }
        assert not run.exists()

    def test_release_sweeps_runs_that_ended_or_are_gone_and_keeps_active_ones(self, jobs, monkeypatch):
        dag = flip36()
        run_task(dag, "max_b")
        ctx = context(dag, "max_b")
        for other in ("ended", "active"):
            ctx["ti"].run_id = other
            dag.get_task("max_b").execute(ctx)
        release = context(dag, "release_caches")
        release["ti"].get_dr_count = lambda dag_id, run_ids, states: int(run_ids == ["active"])

        swept = dag.get_task("release_caches").execute(release)["swept_runs"]

        assert swept == ["ended"]
        assert Path(run_folder(settings.cache_uri(), "flip36", "active").removeprefix("file://")).exists()

    def test_release_caches_is_a_teardown_after_the_last_tasks(self):
        dag = flip36()
        release = dag.get_task("release_caches")

        assert isinstance(release, SparkCacheReleaseOperator) and release.is_teardown
        assert release.upstream_task_ids == {"forget_b"}

    def test_release_caches_outside_a_dag_is_rejected(self):
        with pytest.raises(SpecError, match="inside a `with DAG"):
            release_caches()
