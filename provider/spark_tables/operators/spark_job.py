"""The base of every operator of this provider: validate, resolve the catalog, run one Spark job."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from airflow.providers.common.compat.openlineage.utils.spark import (
    inject_parent_job_information_into_spark_properties,
    inject_transport_information_into_spark_properties,
)
from airflow.providers.common.compat.sdk import AirflowFailException, BaseOperator, conf

from spark_tables.core.cache.table import CachedTable
from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import result_uri
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse, Job, JobSpec
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.hooks.cache.uses import TaskCaches
from spark_tables.hooks.catalog import SparkTablesCatalogHook
from spark_tables.hooks.spark_job import SparkJobHook
from spark_tables.operators.links import SparkApplicationLink, SparkJobTabLink
from spark_tables.utils import settings
from spark_tables.utils.metastore_schema import ensure_metastore_schema
from spark_tables.utils.sql_reader import check_cached_table


@contextlib.contextmanager
def _bad_input_fails_the_task() -> Iterator[None]:
    """Bad input (``SpecError``) fails the task at once, without retries, with its one line."""
    try:
        yield
    except SpecError as err:
        raise AirflowFailException(str(err)) from None


def _abridged(output: dict[str, Any], width: int = 2000) -> str:
    text = json.dumps(output, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


class SparkJobOperator(BaseOperator):
    """Runs one job of this provider through spark-submit; subclasses say which job in ``build_job``.

    XCom gets the job's output with its application (``application_id``, ``application_url`` in the history server
    when the connection names one, ``master``, ``spark_version``, ``session_seconds``, ``work_seconds``); a try that
    fails, in its job or before it (a missing connection), leaves what it has of the same under
    ``spark_tables.failed_try``, with ``try_number``, ``error`` and ``cleanup``.

    :param conn_id: Spark connection (type spark): master, deploy mode, binary. ``spark_default`` that does
        not exist means ``local[*]``.
    :param catalog_conn_id: catalog connection (type spark_tables); missing means the embedded catalog.
    :param conf: Spark configuration, over the catalog's settings. (templated)
    :param name: Spark application name, ``<dag_id>.<task_id>`` by default. (templated)
    :param py_files: more Python files for the driver and executors, comma-separated. (templated)
    :param jars: more jars for the driver and executors, comma-separated. (templated)
    :param caches: cached tables the job reads as temporary views (``CachedTable``): read from the copy an
        earlier task of the DAG run wrote, or computed and written once for the later ones. Their queries are
        rendered with this task's context.
    """

    template_fields: Sequence[str] = ("conf", "name", "py_files", "jars")
    template_fields_renderers: ClassVar[dict[str, str]] = {"conf": "json"}
    operator_extra_links = (SparkJobTabLink(), SparkApplicationLink())
    ui_color = "#e8f1fb"

    def __init__(
        self,
        *,
        conn_id: str = "spark_default",
        catalog_conn_id: str = SparkTablesCatalogHook.default_conn_name,
        conf: dict[str, Any] | None = None,
        name: str | None = None,
        py_files: str | None = None,
        jars: str | None = None,
        driver_memory: str | None = None,
        executor_memory: str | None = None,
        executor_cores: int | None = None,
        num_executors: int | None = None,
        deploy_mode: str | None = None,
        verbose: bool = False,
        caches: Sequence[CachedTable] = (),
        openlineage_inject_parent_job_info: bool = conf.getboolean(
            "openlineage", "spark_inject_parent_job_info", fallback=False
        ),
        openlineage_inject_transport_info: bool = conf.getboolean(
            "openlineage", "spark_inject_transport_info", fallback=False
        ),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self.catalog_conn_id = catalog_conn_id
        self.conf = conf
        self.name = name
        self.py_files = py_files
        self.jars = jars
        self.driver_memory = driver_memory
        self.executor_memory = executor_memory
        self.executor_cores = executor_cores
        self.num_executors = num_executors
        self.deploy_mode = deploy_mode
        self.verbose = verbose
        self.caches = tuple(caches)
        for cache in self.caches:
            if not isinstance(cache, CachedTable):
                raise TypeError(f"caches must hold CachedTable declarations, not {type(cache).__name__}")
            check_cached_table(cache)  # a command given as its query fails as the DAG is parsed
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.openlineage_inject_transport_info = openlineage_inject_transport_info
        self._hook: SparkJobHook | None = None

    def build_job(self, context: Any) -> Job:
        """The validated job this task runs; raise ``SpecError`` for bad input."""
        raise NotImplementedError

    def cached_tables(self, context: Any, job: Job) -> tuple[CachedTable, ...]:
        """The cached tables this task's job reads, their queries rendered for this task."""
        return tuple(
            dataclasses.replace(table, query=self.render_template(table.query, context))
            if table.query is not None
            else table
            for table in self.caches
        )

    def execute(self, context: Any) -> dict[str, Any]:
        try:  # a try that fails before its job starts (a missing connection, say) is reported as well
            with _bad_input_fails_the_task():
                job = self.build_job(context)
                tables = self.cached_tables(context, job)
                caches = TaskCaches.prepare(context["ti"], tables, cache_writers(context) if tables else ())
                self._hook = self.hook_for(context, job, caches.uses)
        except BaseException as err:
            self.report_failed_try(context, err)
            raise
        try:
            result = self.run_hook(self._hook)
        except BaseException as err:
            caches.settle_after_failure(self._hook.last_result)
            self.report_failed_try(context, err)
            raise
        return {**self.xcom_value(result), **caches.settle(result)}

    def shared_folders(self, job: Job, caches: tuple[CacheUse, ...]) -> dict[str, str]:
        """The folders the job's executors write and its driver reads, by the setting (or parameter) that names
        each: on a cluster the driver checks that its executors share them before the job's work. The cache root
        when the job reads cached tables."""
        return {"[spark_tables] cache_uri": settings.cache_uri()} if caches else {}

    def job_jars(self, job: Job) -> list[str]:
        """Jars the job needs besides ``jars`` (a JDBC driver, say)."""
        return []

    def run_hook(self, hook: SparkJobHook) -> JobResult:
        result = hook.run()
        self.log.info(
            "Spark application %s done: session started in %.1f s, job took %.1f s",
            result.application_id,
            result.session_seconds or 0.0,
            result.work_seconds or 0.0,
        )
        self.log.info("job output: %s", _abridged(result.output.to_dict() if result.output is not None else {}))
        return result

    def hook_for(self, context: Any, job: Job, caches: tuple[CacheUse, ...] = (), purpose: str = "") -> SparkJobHook:
        """A hook that runs ``job`` for this task try; everything that can fail on bad input fails here."""
        catalog = SparkTablesCatalogHook(catalog_conn_id=self.catalog_conn_id).get_catalog()
        ti = context["ti"]
        spec = JobSpec(
            job=job,
            result_uri=self.result_uri(context, purpose),
            caches=caches,
            shared_folders=self.shared_folders(job, caches),
        )
        spark_conf = dict(self.conf or {})
        if self.openlineage_inject_parent_job_info:
            spark_conf = inject_parent_job_information_into_spark_properties(spark_conf, context)
        if self.openlineage_inject_transport_info:
            spark_conf = inject_transport_information_into_spark_properties(spark_conf, context)
        self.log.info("catalog: %s", catalog.describe())
        hook = SparkJobHook(
            spec=spec,
            catalog=catalog,
            conn_id=self.conn_id,
            conf=spark_conf,
            name=self.name or f"{ti.dag_id}.{ti.task_id}",
            py_files=self.py_files,
            jars=",".join(jar for jar in (self.jars, *self.job_jars(job)) if jar) or None,
            driver_memory=self.driver_memory,
            executor_memory=self.executor_memory,
            executor_cores=self.executor_cores,
            num_executors=self.num_executors,
            deploy_mode=self.deploy_mode,
            verbose=self.verbose,
        )
        hook.check_master()
        if isinstance(catalog, PostgresMetastore):
            ensure_metastore_schema(catalog)  # the first write anywhere: after every check of the input
        return hook

    def result_uri(self, context: Any, purpose: str = "") -> str:
        """Where this try's job writes its result (and, beside it, where the task asks it to stop)."""
        ti = context["ti"]
        return result_uri(
            settings.exchange_uri(),
            dag_id=ti.dag_id,
            run_id=ti.run_id,
            task_id=ti.task_id,
            map_index=ti.map_index,
            try_number=ti.try_number,
            purpose=purpose,
        )

    def xcom_value(self, result: JobResult) -> dict[str, Any]:
        """What the task returns to XCom: the job's output and where it ran."""
        return {**result.output_fields(), **self.job_fields(result)}

    def job_fields(self, result: JobResult) -> dict[str, Any]:
        """Where and how long the job ran; its page in the history server too, when the Spark connection names one."""
        return {
            "application_id": result.application_id,
            "application_url": self._hook.application_url(result.application_id) if self._hook else None,
            "master": self._hook.master if self._hook else None,
            "spark_version": result.spark_version,
            "session_seconds": result.session_seconds,
            "work_seconds": result.work_seconds,
        }

    def report_failed_try(self, context: Any, error: BaseException, cleanup: list[str] | None = None) -> None:
        """Leave the failed try's report in XCom (``FAILED_TRY``) for the monitoring pages: what the job said before
        it failed (shaped as a result), where it ran, the error's first line and what a cleanup after it undid.
        Called again after a cleanup, it replaces the report; it never raises over the job's error."""
        result = self._hook.last_result if self._hook is not None else None
        report = {
            **(result.output_fields() if result is not None else {}),
            **(self.job_fields(result) if result is not None else {}),
            "try_number": context["ti"].try_number,
            "error": (str(error) or type(error).__name__).splitlines()[0],
            "cleanup": cleanup,
        }
        try:
            context["ti"].xcom_push(key=FAILED_TRY, value=report)
        except Exception as push_error:
            self.log.warning("could not leave the failed try's report in XCom: %s", push_error)

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()


def cache_writers(context: Any) -> list[str]:
    """The tasks of this DAG that can register a copy of a cached table: this provider's job operators."""
    return [task.task_id for task in context["dag"].tasks if isinstance(task, SparkJobOperator)]
