"""Durable jobs: a try whose task process was lost leaves its driver running on a cluster; the next try finds it in
the task state store, waits for it and takes its result instead of running the job again (``core/durable_job.py``).
``SparkJobOperator``'s part of Airflow's ``ResumableJobMixin``, and the failure callback that stops a lost try's
driver.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from airflow.providers.common.compat.sdk import AirflowFailException, ResumableJobMixin, conf
from airflow.sdk import Context

from spark_tables.core.durable_job import CallbackTime, DriverLaunch, DriverState
from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.hooks.driver_processes import DETACHED_STOP_SECONDS, stop_detached_driver
from spark_tables.hooks.job_exchange import forget_launched_files, read_launched_spec
from spark_tables.hooks.spark_connect_job import SparkConnectJobHook
from spark_tables.hooks.spark_job import SparkJobFailed, SparkJobHook
from spark_tables.operators.cache_waits import cache_writers
from spark_tables.tasks.cache.uses import TaskCaches


@contextlib.contextmanager
def _bad_input_fails_the_task() -> Iterator[None]:
    """Bad input (``SpecError``) fails the task at once, without retries, with its one line."""
    try:
        yield
    except SpecError as err:
        raise AirflowFailException(str(err)) from None


class DurableJobMixin(ResumableJobMixin):
    """How ``SparkJobOperator`` submits its job and takes over an earlier try's driver (``durable``)."""

    #: The task state store's key of the launched driver (``DriverLaunch``): renaming it strands running drivers.
    external_id_key = "spark_tables.driver"

    def submit_job(self, context: Context) -> dict[str, Any] | None:
        """Prepare and start this try's job. Its driver starts detached on a standalone master when ``durable``:
        what finds it again is returned, for the task state store. Elsewhere it runs to its end here, and None
        is returned."""
        with _bad_input_fails_the_task():
            job = self.build_job(context)
            self._result = self.result_without_job(job)
            if self._result is not None:
                return None
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

    def get_job_status(self, external_id: Any, context: Context) -> str:
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

    def poll_until_complete(self, external_id: Any, context: Context) -> JobResult:
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

    def get_job_result(self, external_id: Any, context: Context) -> JobResult:
        """The result ``poll_until_complete`` (or, for a finished driver, ``get_job_status``) took."""
        return self._result

    def _hook_for_launch(self, context: Context, launch: DriverLaunch) -> SparkJobHook | None:
        """A hook for the job an earlier try launched, from the spec it left in the exchange; None when it left
        none (its result taken already)."""
        spec = read_launched_spec(launch.result_uri)
        if spec is None:
            return None
        hook = self.hook_for(context, spec.job, spec.caches, result_uri=spec.result_uri)
        self._caches = TaskCaches.of_launched(context["ti"], cache_writers(context) if spec.caches else (), spec.caches)
        return hook

    def _finished_well(self, context: Context, launch: DriverLaunch) -> bool:
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

    def undo_lost_job(self, context: Context, launch: DriverLaunch) -> None:
        """Undo what the driver of an earlier try, lost without a result, may have left: nothing by default; a job
        that makes tables undoes them (``CtasLifecycleOperator``)."""
        forget_launched_files(launch.result_uri)


def stop_lost_driver(context: Context) -> None:
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


def _forget_launch(context: Context, key: str) -> None:
    """Take the launched driver out of the task state store once its result is taken: a later try starts anew."""
    store = context.get("task_state_store")
    if store is not None:
        try:
            store.delete(key)
        except Exception as err:  # a stale launch is found finished or lost by the next try: harmless
            logging.getLogger(__name__).warning("could not forget the launched Spark driver: %s", err)
