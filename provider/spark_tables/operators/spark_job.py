"""The base of every operator of this provider: validate, resolve the catalog, run one Spark job."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, NoReturn

import pendulum
from airflow.providers.common.compat.openlineage.utils.spark import (
    inject_parent_job_information_into_spark_properties,
    inject_transport_information_into_spark_properties,
)
from airflow.providers.common.compat.sdk import AirflowFailException, BaseOperator, ResumableJobMixin, conf

from spark_tables.core.cache.claims import WaitOutcome
from spark_tables.core.cache.layout import cache_folder_name
from spark_tables.core.cache.table import CachedTable
from spark_tables.core.catalog_config import PostgresMetastore
from spark_tables.core.durable_job import CallbackTime, DriverLaunch, DriverState
from spark_tables.core.errors import SpecError
from spark_tables.core.exchange import result_uri
from spark_tables.core.job_kind import Job
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse, JobSpec
from spark_tables.core.spark_settings import check_submit_settings
from spark_tables.core.xcom_keys import FAILED_TRY
from spark_tables.hooks.catalog import SparkTablesCatalogHook
from spark_tables.hooks.driver_processes import DETACHED_STOP_SECONDS, stop_detached_driver
from spark_tables.hooks.job_exchange import forget_launched_files, read_launched_spec
from spark_tables.hooks.spark_connect_job import SparkConnectJobHook, connects_to_server
from spark_tables.hooks.spark_job import SparkJobFailed, SparkJobHook
from spark_tables.operators.links import SparkApplicationLink, SparkJobTabLink
from spark_tables.tasks.cache.uses import CacheWaits, CopyBeingComputed, TaskCaches
from spark_tables.tasks.sql_reader import check_cached_table
from spark_tables.triggers.cached_table import CachedTableTrigger
from spark_tables.utils import settings
from spark_tables.utils.metastore_schema import ensure_metastore_schema


@contextlib.contextmanager
def _bad_input_fails_the_task() -> Iterator[None]:
    """Bad input (``SpecError``) fails the task at once, without retries, with its one line."""
    try:
        yield
    except SpecError as err:
        raise AirflowFailException(str(err)) from None


#: The hook that runs a task's job: through spark-submit, or on a Spark Connect server (session mode).
JobHook = SparkJobHook | SparkConnectJobHook
#: The arguments that shape the Spark application spark-submit starts: a Spark Connect server's is started already.
SUBMIT_ONLY_ARGUMENTS = (
    "py_files",
    "jars",
    "driver_memory",
    "executor_memory",
    "executor_cores",
    "num_executors",
    "deploy_mode",
)

#: How often a task waiting for a cached table's copy looks at its claim, in the triggerer.
_CLAIM_POLL_SECONDS = 2.0


def _abridged(output: dict[str, Any], width: int = 2000) -> str:
    text = json.dumps(output, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


class SparkJobOperator(ResumableJobMixin, BaseOperator):
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
    :param durable: on a standalone ``spark://`` master, start the driver detached, so that it outlives a lost task
        process (a worker killed, its machine gone): the next try finds it, waits for it and takes its result
        instead of running the job again. A user's stop still stops it. No effect on other masters.
    """

    #: The task state store's key of the launched driver (``DriverLaunch``): renaming it strands running drivers.
    external_id_key = "spark_tables.driver"

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
        durable: bool = True,
        **kwargs: Any,
    ) -> None:
        kwargs["on_failure_callback"] = [*as_list(kwargs.get("on_failure_callback")), stop_lost_driver]
        super().__init__(durable=durable, **kwargs)
        check_submit_settings(conf, driver_memory, executor_memory, executor_cores, num_executors)
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
        self._hook: JobHook | None = None
        self._caches: TaskCaches | None = None
        self._result: JobResult | None = None
        self._cache_waits = CacheWaits()

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
        self._hook, self._caches, self._result = None, TaskCaches(context["ti"]), None
        try:  # a try that fails before its job starts (a missing connection, say) is reported as well
            result = self.execute_resumable(context)
        except CopyBeingComputed as busy:
            self._wait_for_copy(busy, self._cache_waits)
        except BaseException as err:
            if self._hook is not None:
                self._caches.settle_after_failure(self._hook.last_result)
            else:
                self._caches.release_claims()
            self.report_failed_try(context, err)
            raise
        finally:
            last = self._hook.last_result if self._hook is not None else None
            #: The "Spark application" link's target, which Airflow takes when the try ends, failed or not.
            self.application_url = self._hook.application_url(last.application_id) if last is not None else None
        return {**self.xcom_value(result), **self._caches.settle(result)}

    # ResumableJobMixin: a try whose task process was lost leaves its driver running on a cluster (``durable``);
    # the next try finds it in the task state store, waits for it and takes its result (core/durable_job.py).

    @functools.cached_property
    def in_session_mode(self) -> bool:
        """Whether the job runs in session mode: ``conn_id`` is a Spark Connect server's (read once a task try)."""
        return connects_to_server(self.conn_id)

    def submit_job(self, context: Any) -> dict[str, Any] | None:
        """Prepare and start this try's job. Its driver starts detached on a standalone master when ``durable``:
        what finds it again is returned, for the task state store. Elsewhere it runs to its end here, and None
        is returned."""
        with _bad_input_fails_the_task():
            job = self.build_job(context)
            tables = self.cached_tables(context, job)
            writers = cache_writers(context) if tables else ()
            server = self.conn_id if tables and self.in_session_mode else None  # keeps them in memory
            self._caches = TaskCaches.prepare(context["ti"], tables, writers, self._cache_waits, server)
            self._hook = self.hook_for(context, job, self._caches.uses)
        if self._hook.durable:
            return self._hook.start_detached(context["ti"].try_number).to_dict()
        if self.durable and self._hook.mode == SparkConnectJobHook.mode:
            self.log.info("durable: does not apply in session mode: the job runs on the Spark Connect server")
        elif self.durable:
            self.log.info(
                "durable: does not apply on %s here: a lost task process ends its Spark job (it applies to "
                "spark-submit on a standalone spark:// master in client mode, with a catalog other than the embedded "
                "Derby one)",
                self._hook.master,
            )
        self._result = self.run_hook(self._hook)
        return None

    def get_job_status(self, external_id: Any, context: Any) -> str:
        """What became of the driver an earlier try launched: a driver that ended without a result, or with a
        failed one, is undone and its job started again; else this try waits for it and takes its result."""
        launch = DriverLaunch.from_dict(external_id)
        if launch is None or launch.try_number >= context["ti"].try_number:
            return DriverState.LOST
        with _bad_input_fails_the_task():
            self._hook = self._hook_for_launch(context, launch)
        if self._hook is None:
            state, application = DriverState.LOST, None
        else:
            state, application = self._hook.driver_state(launch)
        self.log.info(
            "try %d's Spark driver (pid %d on %s, application %s): %s",
            launch.try_number,
            launch.pid,
            launch.host,
            application or "not started",
            state,
        )
        if state == DriverState.FINISHED and not self._finished_well(context, launch):
            state = DriverState.LOST
        if state == DriverState.LOST:
            self.undo_lost_job(context, launch)
            self._hook, self._caches = None, TaskCaches(context["ti"])
        return state

    def is_job_active(self, status: str) -> bool:
        return status in (DriverState.STARTING, DriverState.RUNNING)

    def is_job_succeeded(self, status: str) -> bool:
        return status == DriverState.FINISHED

    def poll_until_complete(self, external_id: Any, context: Any) -> JobResult:
        """Wait for the job's detached driver and take its result (for a job run here, the result it had)."""
        launch = DriverLaunch.from_dict(external_id)
        if launch is None or self._hook is None:
            return self._result
        try:
            self._result = self.run_hook(self._hook, launch)
        finally:
            if self._hook.last_result is not None:
                _forget_launch(context, self.external_id_key)
        return self._result

    def get_job_result(self, external_id: Any, context: Any) -> JobResult:
        """The result ``poll_until_complete`` (or, for a finished driver, ``get_job_status``) took."""
        return self._result

    def _hook_for_launch(self, context: Any, launch: DriverLaunch) -> SparkJobHook | None:
        """A hook for the job an earlier try launched, from the spec it left in the exchange; None when it left
        none (its result taken already)."""
        spec = read_launched_spec(launch.result_uri)
        if spec is None:
            return None
        hook = self.hook_for(context, spec.job, spec.caches, result_uri=spec.result_uri)
        self._caches = TaskCaches.of_launched(context["ti"], cache_writers(context) if spec.caches else (), spec.caches)
        return hook

    def _finished_well(self, context: Any, launch: DriverLaunch) -> bool:
        """Take a finished driver's result: True when its job succeeded; a failed job is run again, as a retry
        would run it."""
        assert self._hook is not None
        try:
            self._result = self._hook.take_detached_result(launch)
        except SparkJobFailed as err:
            self.log.info("try %d's Spark job failed (%s): running it again", launch.try_number, err)
            return False
        finally:
            _forget_launch(context, self.external_id_key)
        self.log_job_done(self._result)
        return True

    def undo_lost_job(self, context: Any, launch: DriverLaunch) -> None:
        """Undo what the driver of an earlier try, lost without a result, may have left: nothing by default; a job
        that makes tables undoes them (``CtasLifecycleOperator``)."""
        forget_launched_files(launch.result_uri)

    def _wait_for_copy(self, busy: CopyBeingComputed, waits: CacheWaits) -> NoReturn:
        """Defer until the task computing ``busy``'s table is done with it (or was lost, or the bound has passed)."""
        now = pendulum.now("UTC")
        waits = waits.waiting(busy, now.isoformat())
        deadline = pendulum.parse(waits.since[cache_folder_name(busy.table)]) + settings.cache_wait_timeout()
        self.log.info(
            "cache %s: waiting, deferred, for its copy: %s, at most until %s", busy.table.name, busy, deadline
        )
        trigger = CachedTableTrigger(
            run=busy.run,
            cache_folder=cache_folder_name(busy.table),
            number=busy.claim.number,
            check_at=min(now + settings.cache_wait_check_interval(), deadline).isoformat(),
            deadline=deadline.isoformat(),
            poll_seconds=_CLAIM_POLL_SECONDS,
            cache=busy.table.name,
        )
        self.defer(trigger=trigger, method_name="execute_after_waiting", kwargs={"waits": waits.to_dict()})

    def execute_after_waiting(self, context: Any, event: Any = None, waits: dict[str, Any] | None = None) -> Any:
        """Resumed after waiting for a cached table's copy: prepare again (a hit now, a takeover, or another wait)."""
        event = event or {}
        past_bound = event.get("outcome") == WaitOutcome.TIMED_OUT.value
        self.log.info("cache %s: done waiting (%s)", event.get("cache"), event.get("outcome"))
        if past_bound:
            self.log.warning("cache %s: waited past [spark_tables] cache_wait_timeout: computes it", event["cache"])
        now = pendulum.now("UTC").isoformat()
        self._cache_waits = CacheWaits.from_dict(waits).resumed(event.get("cache_folder", ""), now, past_bound)
        return self.execute(context)

    def shared_folders(self, job: Job, caches: tuple[CacheUse, ...]) -> dict[str, str]:
        """The folders the job's executors write and its driver reads, by the setting (or parameter) that names
        each: on a cluster the driver checks that its executors share them before the job's work. The cache root
        when the job reads cached tables."""
        return {"[spark_tables] cache_uri": settings.cache_uri()} if caches else {}

    def job_jars(self, job: Job) -> list[str]:
        """Jars the job needs besides ``jars`` (a JDBC driver, say)."""
        return []

    def run_hook(self, hook: JobHook, launch: DriverLaunch | None = None) -> JobResult:
        """Run the hook's job to its end, or wait for the detached driver of ``launch``; log how it went."""
        result = hook.run() if launch is None else hook.wait_detached(launch)
        self.log_job_done(result)
        return result

    def log_job_done(self, result: JobResult) -> None:
        self.log.info(
            "Spark application %s done: session started in %.1f s, job took %.1f s",
            result.application_id,
            result.session_seconds or 0.0,
            result.work_seconds or 0.0,
        )
        self.log.info("job output: %s", _abridged(result.output.to_dict() if result.output is not None else {}))

    def hook_for(
        self,
        context: Any,
        job: Job,
        caches: tuple[CacheUse, ...] = (),
        purpose: str = "",
        result_uri: str | None = None,
    ) -> JobHook:
        """A hook that runs ``job`` for this task try (or waits for an earlier try's, whose result goes to
        ``result_uri``): through spark-submit, or in session mode on the Spark Connect server of a ``spark_connect``
        connection. Everything that can fail on bad input fails here."""
        ti = context["ti"]
        spec = JobSpec(
            job=job,
            result_uri=result_uri or self.result_uri(context, purpose),
            caches=caches,
            shared_folders=self.shared_folders(job, caches),
        )
        if self.in_session_mode:
            return self._session_hook(spec, name=self.name or f"{ti.dag_id}.{ti.task_id}")
        catalog = SparkTablesCatalogHook(catalog_conn_id=self.catalog_conn_id).get_catalog()
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
            durable=self.durable and not purpose,  # a cleanup job is short, and run again by the next try
        )
        hook.check_master()
        if isinstance(catalog, PostgresMetastore):
            ensure_metastore_schema(catalog)  # the first write anywhere: after every check of the input
        return hook

    def _session_hook(self, spec: JobSpec, name: str) -> SparkConnectJobHook:
        """The hook of a job in session mode; the arguments that shape a spark-submit application fail here."""
        given = [argument for argument in SUBMIT_ONLY_ARGUMENTS if getattr(self, argument)]
        if given:
            raise SpecError(
                f"{', '.join(given)}: given for Spark Connect connection {self.conn_id!r}, whose server's application "
                "is started already: leave them out, or use a spark connection (spark-submit)"
            )
        self.log.info("session mode: the job runs on the Spark Connect server of connection %r", self.conn_id)
        hook = SparkConnectJobHook(
            spec=spec, conn_id=self.conn_id, conf=dict(self.conf or {}), name=name, jars=self.job_jars(spec.job)
        )
        hook.check_master()
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
            "mode": self._hook.mode if self._hook else None,
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


def stop_lost_driver(context: Any) -> None:
    """Failure callback: stop the detached driver of a try that was lost and will not be retried.

    Run by the DAG processor once Airflow notices the lost task (after a retry, the next try takes the driver
    over instead). Asks the driver to stop and undo what it created, as ``on_kill`` would have, and waits for it;
    the CTAS cleanup runs after it. A try that ended in its task process left nothing here.
    """
    operator = context["task"]
    wait = callback_time().stop_wait
    stop_detached_driver(operator.result_uri(context), log=operator.log, wait_seconds=wait)


def callback_time() -> CallbackTime:
    """How this provider's failure and retry callbacks spend the time the DAG processor gives them."""
    timeout = conf.getfloat("dag_processor", "dag_file_processor_timeout", fallback=50.0)
    return CallbackTime.within(timeout, DETACHED_STOP_SECONDS)


def _forget_launch(context: Any, key: str) -> None:
    """Take the launched driver out of the task state store once its result is taken: a later try starts anew."""
    store = context.get("task_state_store")
    if store is not None:
        try:
            store.delete(key)
        except Exception as err:  # a stale launch is found finished or lost by the next try: harmless
            logging.getLogger(__name__).warning("could not forget the launched Spark driver: %s", err)


def as_list(callbacks: Any) -> list[Any]:
    """Callbacks as a list, however the DAG gave them."""
    if callbacks is None:
        return []
    return list(callbacks) if isinstance(callbacks, list | tuple) else [callbacks]


def cache_writers(context: Any) -> list[str]:
    """The tasks of this DAG that can register a copy of a cached table: this provider's job operators."""
    return [task.task_id for task in context["dag"].tasks if isinstance(task, SparkJobOperator)]
