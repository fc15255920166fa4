"""Durable jobs: what a later try decides about a launched driver, and the pieces it learns that from."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from spark_tables.core.catalog_config import EmbeddedCatalog, PostgresMetastore
from spark_tables.core.durable_job import START_TIMEOUT_SECONDS, DriverFacts, DriverLaunch, DriverState, driver_state
from spark_tables.core.exchange import cancel_uri, spec_uri, started_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import JobSpec
from spark_tables.core.sql.job import SqlJob
from spark_tables.hooks.driver_processes import ended_how, stop_detached_driver
from spark_tables.hooks.job_exchange import forget_launched_files, read_launched_spec
from spark_tables.hooks.spark_job import SparkJobHook
from spark_tables.jobs.entry import announce_start
from spark_tables.utils.log_following import follow_log
from spark_tables.utils.spark_master import application_active, master_ui_urls

LAUNCH = DriverLaunch(result_uri="file:///x/r.json", host="worker-1", pid=4242, launched_at=1000.0, try_number=1)


def _facts(**given: Any) -> DriverFacts:
    facts = {
        "result_written": False,
        "application_id": None,
        "application_active": None,
        "process_alive": None,
        "seconds_since_launch": 1.0,
    }
    return DriverFacts(**{**facts, **given})


class TestDriverState:
    @pytest.mark.parametrize(
        ("given", "state"),
        [
            ({"result_written": True, "application_active": True}, DriverState.FINISHED),
            ({"result_written": True, "process_alive": False}, DriverState.FINISHED),
            ({"application_id": "app-1", "application_active": True}, DriverState.RUNNING),
            ({"application_id": "app-1", "application_active": True, "process_alive": False}, DriverState.RUNNING),
            ({"application_id": "app-1", "application_active": False}, DriverState.LOST),
            ({"application_id": "app-1", "application_active": False, "process_alive": False}, DriverState.LOST),
            # the application ended but its driver still writes its result: wait for the process
            ({"application_id": "app-1", "application_active": False, "process_alive": True}, DriverState.RUNNING),
            ({"process_alive": True}, DriverState.STARTING),
            ({"process_alive": False}, DriverState.LOST),
            ({"application_id": "app-1", "process_alive": True}, DriverState.RUNNING),
            ({"application_id": "app-1", "process_alive": False}, DriverState.LOST),
            ({"application_id": "app-1"}, DriverState.RUNNING),
            ({"seconds_since_launch": START_TIMEOUT_SECONDS - 1}, DriverState.STARTING),
            ({"seconds_since_launch": START_TIMEOUT_SECONDS}, DriverState.LOST),
        ],
    )
    def test_the_state_follows_from_the_facts(self, given, state):
        assert driver_state(_facts(**given)) is state

    def test_the_start_timeout_is_a_parameter(self):
        assert driver_state(_facts(seconds_since_launch=11.0), start_timeout=10.0) is DriverState.LOST


class TestDriverLaunch:
    def test_it_goes_through_the_task_state_store_as_json(self):
        assert DriverLaunch.from_dict(json.loads(json.dumps(LAUNCH.to_dict()))) == LAUNCH

    @pytest.mark.parametrize(
        "stored", [None, "driver-1", {"result_uri": "file:///x/r.json"}, {**LAUNCH.to_dict(), "pid": "x"}]
    )
    def test_a_value_that_is_not_a_launch_is_none(self, stored):
        assert DriverLaunch.from_dict(stored) is None


class _Master(BaseHTTPRequestHandler):
    state: ClassVar[dict[str, Any]] = {}

    def do_GET(self) -> None:
        body = json.dumps(self.state).encode()
        self.send_response(200 if self.path == "/json/" else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def master_ui():
    """A web server answering ``/json/`` as a standalone master's UI does, with ``_Master.state``."""
    server = HTTPServer(("127.0.0.1", 0), _Master)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class TestStandaloneMaster:
    def test_the_ui_is_on_the_master_hosts_default_port_unless_the_connection_names_it(self):
        assert master_ui_urls("spark://m1:7077") == ["http://m1:8080"]
        assert master_ui_urls("spark://m1:7077,m2:7077") == ["http://m1:8080", "http://m2:8080"]
        assert master_ui_urls("spark://m1:7077", "http://ui.example:9090/") == ["http://ui.example:9090"]
        assert master_ui_urls("spark://admin:s3cret@m1:7077") == ["http://m1:8080"]
        assert master_ui_urls("spark://[::1]:7077") == ["http://[::1]:8080"]

    def test_an_application_is_active_while_the_master_lists_it_so(self, master_ui, monkeypatch):
        monkeypatch.setattr(
            _Master,
            "state",
            {"status": "ALIVE", "activeapps": [{"id": "app-2"}], "completedapps": [{"id": "app-1"}]},
        )

        assert application_active([master_ui], "app-2") is True
        assert application_active([master_ui], "app-1") is False
        assert application_active([master_ui], "app-forgotten") is False

    def test_a_standby_master_is_passed_over_and_no_answer_is_none(self, master_ui, monkeypatch):
        monkeypatch.setattr(_Master, "state", {"status": "STANDBY", "activeapps": []})

        assert application_active([master_ui], "app-2") is None
        assert application_active(["http://127.0.0.1:9"], "app-2") is None


class TestFollowLog:
    def test_lines_come_as_written_and_the_rest_when_the_writer_has_ended(self, tmp_path):
        log = tmp_path / "driver.log"
        log.write_text("one\ntwo\n")
        asked = []

        def ended() -> bool:
            asked.append(True)
            if len(asked) == 1:  # the writer goes on: a line, and a part of the next
                with log.open("a") as handle:
                    handle.write("three\nfour, unfin")
                return False
            with log.open("a") as handle:
                handle.write("ished\nfive")
            return True

        assert list(follow_log(str(log), ended, ask_every=0)) == [
            "one\n",
            "two\n",
            "three\n",
            "four, unfinished\n",
            "five",
        ]


class TestLaunchedFiles:
    def _spec(self, tmp_path: Path, durable: bool) -> JobSpec:
        return JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri=f"file://{tmp_path}/r.json", durable=durable)

    def test_only_a_durable_spec_is_a_launch(self, tmp_path):
        for durable in (True, False):
            spec = self._spec(tmp_path, durable)
            Path(spec_uri(spec.result_uri).removeprefix("file://")).write_text(spec.to_json())

            assert (read_launched_spec(spec.result_uri) == spec) is durable
        assert read_launched_spec(f"file://{tmp_path}/other.json") is None

    def test_the_spec_says_durable_only_when_it_is(self, tmp_path):
        assert "durable" not in json.loads(self._spec(tmp_path, False).to_json())
        assert JobSpec.from_json(self._spec(tmp_path, True).to_json()).durable is True

    def test_the_driver_says_which_application_it_started(self, tmp_path):
        announce_start(f"file://{tmp_path}/r.json", "app-7")

        note = json.loads(Path(started_uri(f"file://{tmp_path}/r.json").removeprefix("file://")).read_text())
        assert note["application_id"] == "app-7"
        assert isinstance(note["pid"], int)

    def test_forgetting_a_launch_removes_every_file_beside_its_result(self, tmp_path, spark_tables_home):
        spec = self._spec(tmp_path, True)
        for uri in (
            spec.result_uri,
            spec_uri(spec.result_uri),
            started_uri(spec.result_uri),
            cancel_uri(spec.result_uri),
        ):
            Path(uri.removeprefix("file://")).write_text("{}")
        (tmp_path / "r.log").write_text("log")
        (tmp_path / "kept.json").write_text("{}")

        forget_launched_files(spec.result_uri)

        assert [path.name for path in tmp_path.iterdir()] == ["kept.json"]

    def test_a_driver_gone_without_a_result_is_reported_with_what_can_be_seen_of_it(self, tmp_path):
        result_uri = f"file://{tmp_path}/r.json"
        no_such_pid = 2**22 + 1  # above Linux's largest pid
        launch = DriverLaunch(result_uri, socket.gethostname(), no_such_pid, 1000.0, 1)
        assert ended_how(launch) == "its process is gone; its application: never announced"

        announce_start(result_uri, "app-7")
        elsewhere = DriverLaunch(result_uri, "another-host", 4242, 1000.0, 1)
        assert ended_how(elsewhere) == "its process is out of sight; its application: app-7"

    def test_stopping_a_lost_try_s_driver_that_has_finished_takes_its_result_and_writes_no_marker(self, tmp_path):
        spec = self._spec(tmp_path, True)
        Path(spec_uri(spec.result_uri).removeprefix("file://")).write_text(spec.to_json())
        Path(spec.result_uri.removeprefix("file://")).write_text(JobResult(kind="sql", error="boom").to_json())
        logged: list[str] = []
        log = SimpleNamespace(info=lambda message, *args: logged.append(message % args), warning=logged.append)

        stop_detached_driver(spec.result_uri, log)

        assert logged == ["the lost try's Spark driver: boom"]
        assert list(tmp_path.iterdir()) == []

    def test_a_try_that_started_no_durable_job_is_left_alone(self, tmp_path):
        spec = self._spec(tmp_path, False)
        Path(spec_uri(spec.result_uri).removeprefix("file://")).write_text(spec.to_json())

        stop_detached_driver(spec.result_uri, SimpleNamespace())

        assert [path.name for path in tmp_path.iterdir()] == ["r.spec.json"]


class TestDetaching:
    SPEC = JobSpec(job=SqlJob(statements=("SELECT 1",)), result_uri="file:///tmp/exchange/r.json")

    def test_a_standalone_master_in_client_mode_detaches_the_driver_of_a_durable_job(self, metastore, set_connection):
        set_connection("spark_x", conn_type="spark", host="spark://m", port=7077, extra={"deploy-mode": "client"})

        hook = SparkJobHook(spec=self.SPEC, catalog=metastore, conn_id="spark_x", durable=True)

        assert hook.durable and hook.spec.durable
        assert hook.spec.watch_pid is None, "a detached driver outlives the task process"
        assert hook.application_args == [f"@{spec_uri(self.SPEC.result_uri)}"], "a later try reads the spec back"

    @pytest.mark.parametrize("master", ["local[2]", "yarn"])
    def test_other_masters_do_not_detach(self, metastore, set_connection, master):
        set_connection("spark_x", conn_type="spark", host=master)

        hook = SparkJobHook(spec=self.SPEC, catalog=metastore, conn_id="spark_x", durable=True)

        assert not hook.durable and not hook.spec.durable
        assert hook.spec.watch_pid is not None

    def test_the_embedded_catalog_does_not_detach_its_one_application_at_a_time(
        self, spark_tables_home, set_connection
    ):
        set_connection("spark_x", conn_type="spark", host="spark://m", port=7077)

        hook = SparkJobHook(
            spec=self.SPEC, catalog=EmbeddedCatalog(home=str(spark_tables_home)), conn_id="spark_x", durable=True
        )

        assert not hook.durable


@pytest.fixture
def metastore(tmp_path) -> PostgresMetastore:
    return PostgresMetastore(host="pg", port=5432, user="u", database="m", warehouse=str(tmp_path / "warehouse"))
