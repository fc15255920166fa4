"""The adapter's tripwire: the installed Spark provider still has every private member the adapter relies on.

When an upgrade of apache-airflow-providers-apache-spark renames or drops one, this fails here, naming it,
instead of somewhere in the middle of a task.
"""

from __future__ import annotations

import inspect
from typing import ClassVar

import pytest
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from spark_tables.hooks.spark_submit import DEBUG_MESSAGES, PRIVATE_FIELDS, PRIVATE_METHODS, SparkSubmitAdapter

#: The parameters the adapter's callers pass to each private method (besides self).
EXPECTED_PARAMETERS = {
    "_resolve_connection": [],
    "_get_spark_binary_path": [],
    "_process_spark_submit_log": ["itr"],
    "_build_spark_submit_command": ["application"],
}


@pytest.mark.parametrize("name", PRIVATE_METHODS)
def test_the_spark_provider_still_has_the_private_method(name: str) -> None:
    method = getattr(SparkSubmitHook, name, None)
    assert callable(method), f"SparkSubmitHook.{name} is gone: update spark_tables/hooks/spark_submit.py"
    assert list(inspect.signature(method).parameters)[1:] == EXPECTED_PARAMETERS[name]


def test_every_private_method_used_is_checked() -> None:
    assert set(EXPECTED_PARAMETERS) == set(PRIVATE_METHODS)


def test_the_spark_provider_still_sets_the_private_fields(set_connection) -> None:
    set_connection("spark_x", conn_type="spark", host="local[2]", extra={"deploy-mode": "client"})
    hook = SparkSubmitHook(conn_id="spark_x", name="n", application_args=["a"], driver_class_path="/x.jar")

    missing = [name for name in PRIVATE_FIELDS if name not in vars(hook) and name != "_submit_sp"]
    assert not missing, f"SparkSubmitHook no longer sets {missing}: update spark_tables/hooks/spark_submit.py"
    assert (hook._conn_id, hook._name, hook._application_args, hook._driver_class_path) == (
        "spark_x",
        "n",
        ["a"],
        "/x.jar",
    )
    assert hook._connection["master"] == "local[2]" and hook._connection["deploy_mode"] == "client"
    assert isinstance(hook._conf, dict) and hook._deploy_mode is None


def test_the_running_process_is_where_the_adapter_reads_it(set_connection, tmp_path) -> None:
    """``submit`` keeps its Popen in ``_submit_sp`` and the output in ``_last_submit_log_lines``."""
    fake_submit = tmp_path / "spark-submit"
    fake_submit.write_text("#!/bin/sh\necho 'line one'\necho 'line two'\n")
    fake_submit.chmod(0o755)
    set_connection("spark_x", conn_type="spark", host="local[2]")

    class Adapter(SparkSubmitAdapter):
        seen: ClassVar[list[str]] = []

        def spark_binary_command(self, default):
            return [str(fake_submit)]

        def watch_log(self, lines):
            for line in lines:
                self.seen.append(line.strip())
                yield line

    hook = Adapter(conn_id="spark_x")
    assert hook.submit_process is None
    hook.submit("app.py")

    assert hook.submit_process is not None and hook.submit_process.returncode == 0
    assert hook.seen == ["line one", "line two"]
    assert [line.strip() for line in hook.recent_log_lines] == ["line one", "line two"]
    assert hook.submit_command("app.py")[0] == str(fake_submit)


@pytest.mark.parametrize("message", DEBUG_MESSAGES)
def test_the_spark_provider_still_logs_the_messages_the_adapter_moves_to_debug(message: str) -> None:
    """The adapter recognises them by their format strings: a reworded one would be back at INFO, unnoticed."""
    assert f'"{message}"' in inspect.getsource(SparkSubmitHook), (
        f"SparkSubmitHook no longer logs {message!r}: update DEBUG_MESSAGES in spark_tables/hooks/spark_submit.py"
    )
