"""The Airflow side of CTAS's lifecycle, shared by every operator whose job makes CTAS tables: who owns them, the
claim that names them while the job runs, and the cleanup after a try that could not clean up itself."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Context

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.ctas.result import CtasCleanupResult, CtasResult
from spark_tables.core.durable_job import CLEANUP_JOB_SECONDS, CallbackTime, DriverLaunch
from spark_tables.core.job_kind import Job
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.core.sql.job import SqlJob
from spark_tables.core.sql.result import SqlResult
from spark_tables.operators.durable_jobs import callback_time
from spark_tables.operators.spark_job import JobHook, SparkJobOperator, as_list
from spark_tables.tasks.ctas import claims as ctas_claims


class CtasLifecycleOperator(SparkJobOperator):
    """A job operator whose job makes tables marked as this task try's: ``SparkCtasOperator``, and
    ``SparkSqlJobOperator`` for its ``CREATE TABLE ... AS SELECT`` statements.

    The job gets the try as its tables' owner (``table_owner``) and what lost tries of other tasks left
    (``sweep``). While it runs, the task's claim names its tables; the claim is released once the job reports
    them complete or undone. A job that ended without saying so (its driver lost, the task interrupted first)
    gets a cleanup job, and so does a try that died with its task process (the failure and retry callbacks).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # After the lost try's driver is stopped (``stop_lost_driver``, which the base adds), its tables are undone.
        self.on_failure_callback = [*as_list(self.on_failure_callback), clean_up_after_lost_try]
        self.on_retry_callback = [*as_list(self.on_retry_callback), clean_up_before_retry]
        self._claim: ctas_claims.Claim | None = None

    def table_owner(self, context: Context) -> TableOwner:
        """The try whose marks the job's tables carry until the job has succeeded."""
        return TableOwner.of_task_instance(context["ti"])

    def sweep(self, context: Context) -> list[CtasCleanupJob]:
        """What lost tries of other tasks on this catalog left: the job undoes it before its own work."""
        try:
            claims = ctas_claims.sweepable(context["ti"], self.catalog_conn_id)
        except Exception as err:  # sweeping is a courtesy to other tasks: never the reason this one fails
            self.log.warning("could not look for what lost tries of other tasks left: %s", err)
            return []
        for claim in claims:
            self.log.info(
                "will sweep %s, claimed by %s, whose task is no longer running",
                ", ".join(claim.tables),
                claim.owner.describe(),
            )
        return [CtasCleanupJob(tables=claim.tables, owner=claim.owner) for claim in claims]

    def execute(self, context: Context) -> dict[str, Any]:
        self._claim = None
        try:
            value = super().execute(context)
        except BaseException as err:
            result = self._hook.last_result if self._hook is not None else None
            if self._claim is not None:  # the job was to make tables, and has started
                undone = self._settle_failed_claim(context, self._claim, result)
                if undone is not None:
                    self.report_failed_try(context, err, cleanup=undone)
            raise
        finally:
            _release_swept(self._hook.last_result if self._hook is not None else None)
        if self._claim is not None:
            ctas_claims.release_claim(self._claim.owner)
        return value

    def _settle_failed_claim(
        self, context: Context, claim: ctas_claims.Claim, result: JobResult | None
    ) -> list[str] | None:
        """Release the claim of a failed job that undid its tables; else run the cleanup job, which releases it.
        What the cleanup job undid; None when none ran, or it failed."""
        if _cleaned_up(result):
            ctas_claims.release_claim(claim.owner)
            return None
        self.log.warning("the job did not report its cleanup: undoing what this try may have left")
        try:
            return _run_cleanup(self, context, claim)
        except Exception as cleanup_error:  # the task fails with the job's error, not the cleanup's
            self.log.error(
                "the cleanup job failed too (%s): the claim is kept for this task's retry, the next CTAS on this "
                "catalog, or the failure callback",
                cleanup_error,
            )
            return None

    def hook_for(
        self,
        context: Context,
        job: Job,
        caches: tuple[CacheUse, ...] = (),
        purpose: str = "",
        result_uri: str | None = None,
    ) -> JobHook:
        hook = super().hook_for(context, job, caches, purpose, result_uri)
        if isinstance(job, CtasJob | SqlJob) and job.owned_tables:  # last: only a job that will run claims tables
            self._claim = ctas_claims.Claim(job.owned_tables, job.owner, self.catalog_conn_id, hook.durable)
            ctas_claims.write_claim(self._claim)  # the same again when this try takes over a lost try's job
        return hook

    def undo_lost_job(self, context: Context, launch: DriverLaunch) -> None:
        """Undo the tables the lost try's driver claimed, before the job runs again."""
        claim = ctas_claims.read_claim(TableOwner.of_task_instance(context["ti"]))
        if claim is not None and claim.owner.try_number == launch.try_number:
            _run_cleanup(self, context, claim)
        super().undo_lost_job(context, launch)


def clean_up_after_lost_try(context: Context) -> None:
    """Failure and retry callback: clean up after a try that died before it knew whether it left anything.

    In the task process a try that ended normally has released its claim already, so this does nothing. After
    a try was lost (worker gone, driver killed outright), the DAG processor runs it once Airflow notices, and
    it runs a cleanup job for the claimed tables.
    """
    claim = ctas_claims.read_claim(TableOwner.of_task_instance(context["ti"]))
    if claim is None or claim.owner.try_number != context["ti"].try_number:
        return  # released, or a later try's: that try is at work and cleans up after itself
    if not callback_time().cleanup_fits:
        context["task"].log.warning(
            "the cleanup job of %s needs up to %.0f s, more than [dag_processor] dag_file_processor_timeout leaves "
            "this callback: the claim is left to the next CTAS on the catalog; raise the timeout to %.0f s or more "
            "to clean up here",
            ", ".join(claim.tables),
            CLEANUP_JOB_SECONDS,
            CallbackTime.timeout_needed(),
        )
        return
    _run_cleanup(context["task"], context, claim)


def clean_up_before_retry(context: Context) -> None:
    """Retry callback: as ``clean_up_after_lost_try``, but a lost try's durable job is left to the next try, which
    takes over its driver, or undoes what it left if it is gone."""
    claim = ctas_claims.read_claim(TableOwner.of_task_instance(context["ti"]))
    if claim is not None and claim.durable:
        return
    clean_up_after_lost_try(context)


def _run_cleanup(operator: SparkJobOperator, context: Context, claim: ctas_claims.Claim) -> list[str]:
    """Run the cleanup job for a claim, then release it; what it undid."""
    operator.log.info("cleanup job for %s, after %s", ", ".join(claim.tables), claim.owner.describe())
    cleanup = CtasCleanupJob(tables=claim.tables, owner=claim.owner)
    result = operator.run_hook(operator.hook_for(context, cleanup, purpose="cleanup"))
    undone = list(result.output.undone) if isinstance(result.output, CtasCleanupResult) else []
    operator.log.info("cleanup: %s", "; ".join(undone) or "nothing was left")
    ctas_claims.release_claim(claim.owner)
    return undone


def _release_swept(result: JobResult | None) -> None:
    """Release the claims of lost tries whose tables the job swept."""
    if result is None or not isinstance(result.output, CtasResult | SqlResult):
        return
    for swept in result.output.swept:
        if swept.undone is not None:
            ctas_claims.release_claim(TableOwner.from_dict(swept.owner))


def _cleaned_up(result: JobResult | None) -> bool:
    return result is not None and isinstance(result.output, CtasResult | SqlResult) and result.output.cleaned_up is True
