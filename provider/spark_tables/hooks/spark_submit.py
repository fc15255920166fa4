"""The one place that touches the Spark provider's ``SparkSubmitHook`` beyond its public API.

``SparkJobHook`` runs spark-submit through the Spark provider's hook (its command line, connection handling,
log streaming, driver tracking and kills), and needs a few things the provider keeps private: the resolved
connection and Spark conf, the running process, the last log lines, the application arguments, and three
methods to extend (connection resolution, the spark-submit binary, the log stream). This adapter gives each a
public name; ``PRIVATE_METHODS`` and ``PRIVATE_FIELDS`` list what it relies on, and
``tests/unit/test_spark_submit_adapter.py`` fails when the installed provider no longer has one of them.

It also moves two of the provider's INFO lines to DEBUG (``DEBUG_MESSAGES``, tripwired the same way): the whole
spark-submit command, which buries a task's one useful line under its conf and the job's spec, and the fallback to
YARN when ``spark_default`` is missing, which this provider replaces with ``local[*]`` and says so in its own line.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

#: SparkSubmitHook's private methods this adapter overrides or calls.
PRIVATE_METHODS = (
    "_resolve_connection",
    "_get_spark_binary_path",
    "_process_spark_submit_log",
    "_build_spark_submit_command",
)
#: SparkSubmitHook's private fields this adapter reads or sets, all assigned in its ``__init__`` (or ``submit``).
PRIVATE_FIELDS = (
    "_conn_id",
    "_name",
    "_deploy_mode",
    "_driver_class_path",
    "_application_args",
    "_conf",
    "_connection",
    "_submit_sp",
    "_last_submit_log_lines",
)
#: SparkSubmitHook's INFO messages (their format strings, as it logs them) that this adapter logs at DEBUG.
DEBUG_MESSAGES = ("Spark-Submit cmd: %s", "Could not load connection string %s, defaulting to %s")


class _ProviderLog:
    """A hook's logger (as ``LoggingMixin`` gives it at each call), but for ``DEBUG_MESSAGES``, which go to DEBUG."""

    def __init__(self, hook: SparkSubmitHook) -> None:
        self._hook = hook

    @property
    def _log(self) -> Any:
        return SparkSubmitHook.log.fget(self._hook)  # type: ignore[attr-defined]

    def info(self, event: Any, *args: Any, **kwargs: Any) -> Any:
        if event in DEBUG_MESSAGES:
            return self._log.debug(event, *args, **kwargs)
        return self._log.info(event, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


class SparkSubmitAdapter(SparkSubmitHook):
    """``SparkSubmitHook`` with public names for what this provider needs of it.

    Subclasses extend ``resolve_connection``, ``spark_binary_command`` and ``watch_log`` instead of the
    provider's private methods.
    """

    @property
    def log(self) -> Any:
        if "_provider_log" not in self.__dict__:
            self.__dict__["_provider_log"] = _ProviderLog(self)
        return self.__dict__["_provider_log"]

    # What the provider keeps private, by public names.

    @property
    def conn_id(self) -> str:
        return self._conn_id

    @property
    def app_name(self) -> str:
        return self._name

    @property
    def deploy_mode_argument(self) -> str | None:
        """The ``deploy_mode`` given to the hook (the connection's applies when this is None)."""
        return self._deploy_mode

    @property
    def driver_class_path(self) -> str | None:
        return self._driver_class_path

    @property
    def spark_conf(self) -> dict[str, Any]:
        """The Spark conf spark-submit gets (``--conf``), mutable until ``submit``."""
        return self._conf

    @property
    def connection_settings(self) -> dict[str, Any]:
        """The resolved Spark connection: ``master``, ``deploy_mode``, ``spark_binary``, ``queue``, ..."""
        return self._connection

    @property
    def application_args(self) -> list[str]:
        return self._application_args

    @application_args.setter
    def application_args(self, args: list[str]) -> None:
        self._application_args = args

    @property
    def submit_process(self) -> subprocess.Popen | None:
        """The running (or ended) spark-submit process of the last ``submit``, None before it."""
        return self._submit_sp

    @submit_process.setter
    def submit_process(self, process: subprocess.Popen | None) -> None:
        self._submit_sp = process

    @property
    def recent_log_lines(self) -> Iterable[str]:
        """The last lines spark-submit wrote."""
        return self._last_submit_log_lines

    def submit_command(self, application: str) -> list[str]:
        """The spark-submit command line ``submit`` runs for ``application``."""
        return self._build_spark_submit_command(application)

    def pass_log_on(self, lines: Iterator[Any]) -> None:
        """Stream spark-submit's output into the task log (and to ``watch_log``) as ``submit`` does."""
        self._process_spark_submit_log(lines)

    # Extension points, called by the provider's own code through its private methods.

    def resolve_connection(self, resolve: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The connection settings; ``resolve`` is the provider's own resolution."""
        return resolve()

    def spark_binary_command(self, default: Callable[[], list[str]]) -> list[str]:
        """The command that starts spark-submit; ``default`` is the provider's (the binary's name, on PATH)."""
        return default()

    def watch_log(self, lines: Iterator[Any]) -> Iterator[Any]:
        """Look at each spark-submit output line on its way to the task log."""
        return lines

    def _resolve_connection(self) -> dict[str, Any]:
        return self.resolve_connection(super()._resolve_connection)

    def _get_spark_binary_path(self) -> list[str]:
        return self.spark_binary_command(super()._get_spark_binary_path)

    def _process_spark_submit_log(self, itr: Iterator[Any]) -> None:
        super()._process_spark_submit_log(self.watch_log(itr))
