"""The files that share a session's cluster or Airflow services are grouped onto one xdist worker
(tests/conftest.py): a file that uses one and is left out would start it a second time in the other worker. Session
mode's Spark Connect server may start once in each worker (a file of its group's uses it; others may too)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import tests.conftest
from tests.conftest import SHARED_SESSIONS, SLOWEST_FIRST, pytest_collection_modifyitems

REPO = Path(__file__).resolve().parents[2]
#: The session fixtures behind each group, as a test file that uses one names it.
FIXTURES = {
    "spark_cluster": r"\b(spark_cluster|on_cluster|cluster_airflow|cluster_session|cluster_examples)\b",
    "airflow_services": r"def test_\w+\([^)]*\bairflow: AirflowServices\b",
    "spark_connect": r"\b(connect_server|in_session)\b(?!\.(sh|py))",  # not scripts/connect_server.sh
    "delta_server": r"\bdelta_server\b",
}


def test_every_grouped_file_exists() -> None:
    for paths in SHARED_SESSIONS.values():
        for path in paths:
            assert (REPO / path).is_file(), path


def test_every_file_that_uses_a_shared_session_is_in_its_group() -> None:
    assert set(FIXTURES) == set(SHARED_SESSIONS)
    for group, pattern in FIXTURES.items():
        users = {
            str(path.relative_to(REPO))
            for path in (REPO / "tests").rglob("test_*.py")
            if re.search(pattern, path.read_text()) and "unit" not in path.parts
        }
        if group == "spark_connect":
            assert users >= set(SHARED_SESSIONS[group]), group
            assert len(users) > len(SHARED_SESSIONS[group]), "the check sees the server's users outside the group"
        else:
            assert users == set(SHARED_SESSIONS[group]), group


class _Options:
    """What xdist's file scheduler reads of pytest's configuration: ``--dist loadfile -n 2``."""

    option = SimpleNamespace(loadscopereorder=True)

    def getvalue(self, name: str) -> object:
        return {"dist": "loadfile", "tx": ["2*popen"]}[name]


def test_the_scheduler_gives_a_group_s_files_to_one_worker_and_other_files_alone() -> None:
    """A tripwire on the one private part used: xdist's file scheduler's ``_split_scope``, overridden."""
    from tests.conftest import pytest_xdist_make_scheduler

    scheduler = pytest_xdist_make_scheduler(_Options(), None)  # type: ignore[arg-type]
    assert scheduler._split_scope("tests/integration/test_cluster.py::test_sql") == "spark_cluster"
    assert scheduler._split_scope("tests/integration/test_durable_jobs.py::test_x[a::b]") == "spark_cluster"
    assert scheduler._split_scope("tests/integration/test_as_deployed.py::test_a") == "airflow_services"
    assert scheduler._split_scope("tests/unit/test_durations.py::T::test_d[1 ms]") == "tests/unit/test_durations.py"
    assert scheduler.config.option.loadscopereorder is False, "units go out in the order collected"


def test_the_slowest_units_come_first_and_each_file_keeps_its_tests_order() -> None:
    collected = [
        "tests/integration/test_ctas.py::test_a",
        "tests/integration/test_cluster.py::test_sql",
        "tests/integration/test_ctas.py::test_b",
        "tests/integration/test_readme_snippets.py::test_r",
        "tests/spark/test_sql_job.py::test_s",
        "tests/integration/test_as_deployed.py::test_d",
        "tests/integration/test_durable_jobs.py::test_k",
        "tests/unit/test_durations.py::test_u",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in collected]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        "tests/integration/test_durable_jobs.py::test_k",  # the group's files in its order
        "tests/integration/test_cluster.py::test_sql",
        "tests/integration/test_readme_snippets.py::test_r",
        "tests/integration/test_as_deployed.py::test_d",
        "tests/integration/test_ctas.py::test_a",
        "tests/integration/test_ctas.py::test_b",
        "tests/spark/test_sql_job.py::test_s",
        "tests/unit/test_durations.py::test_u",
    ]
    assert set(SHARED_SESSIONS) <= set(SLOWEST_FIRST)
    assert all((REPO / unit).is_file() for unit in SLOWEST_FIRST if unit not in SHARED_SESSIONS)


def test_a_groups_services_end_after_its_last_test_and_once(request: pytest.FixtureRequest) -> None:
    """``for_the_group``'s services are ended by the teardown hook once the next test is of another unit (or there is
    none), not before, in the reverse order of their start, and not again when their fixture ends."""
    assert tests.conftest in request.config.pluginmanager.get_plugins(), "the fixtures register where the hook reads"
    ended: list[str] = []

    @contextlib.contextmanager
    def service(name: str) -> Iterator[str]:
        yield name
        ended.append(name)

    cluster, airflow = SHARED_SESSIONS["spark_cluster"][:2]
    first = tests.conftest.for_the_group("spark_cluster", service("cluster"))
    second = tests.conftest.for_the_group("spark_cluster", service("airflow"))
    assert (first.__enter__(), second.__enter__()) == ("cluster", "airflow")

    def teardown(item: str, nextitem: str | None) -> None:
        hook = tests.conftest.pytest_runtest_teardown(
            SimpleNamespace(nodeid=f"{item}::t"), SimpleNamespace(nodeid=f"{nextitem}::t") if nextitem else None
        )
        next(hook)
        with contextlib.suppress(StopIteration):
            next(hook)

    teardown(cluster, airflow)  # the next test is of the same group
    assert ended == []
    teardown(airflow, "tests/unit/test_errors.py")
    assert ended == ["airflow", "cluster"]
    second.__exit__(None, None, None)
    first.__exit__(None, None, None)
    assert ended == ["airflow", "cluster"], "ended once"
