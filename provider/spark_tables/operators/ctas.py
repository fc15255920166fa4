"""CREATE TABLE ... AS SELECT with FLIP-218's lifecycle: created before the job, dropped if it fails or stops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from spark_tables.core.ctas.job import CtasCleanupJob, CtasJob
from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.ctas.statement import parse_ctas
from spark_tables.core.errors import SpecError
from spark_tables.core.job_result import JobResult
from spark_tables.core.job_spec import CacheUse
from spark_tables.hooks.ctas import claims as ctas_claims
from spark_tables.operators.spark_job import SparkJobOperator

_STATEMENT_FIELDS = ("table", "query", "producer", "partitioned_by", "properties", "location", "comment")


class SparkCtasOperator(SparkJobOperator):
    """Create a table from a query's rows, or from a PySpark function's, and never leave a half-made table.

    Give ``sql`` (``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] t [USING f] [PARTITIONED BY (...)] [LOCATION '...']
    [COMMENT '...'] [TBLPROPERTIES (...)] AS SELECT ...``) or the same as parameters: ``table`` with ``query`` or
    ``producer`` (``module:function`` of a SparkSession returning a DataFrame, shipped with ``py_files``).

    The table is created, with the schema the query produces, before the job fills it, and marked in its
    properties as this try's. If the job fails or the task is stopped, what this try created is dropped with its
    files, and only that: a table that existed before is never dropped. Every try first undoes what earlier
    tries of the task left, so retries are safe. XCom gets the table, rows, bytes, location and what was undone.

    :param atomicity: ``table`` (the FLIP's: visible from creation, dropped on failure) or ``staging`` (the rows
        go to a staging table that takes the final name only when complete). REPLACE needs ``staging``; it is
        the default then.
    :param if_not_exists: succeed without running the job when the table exists.
    :param replace: replace the table if it exists; the old one stays readable until the new one is complete.
    """

    template_fields: Sequence[str] = (*SparkJobOperator.template_fields, "sql", *_STATEMENT_FIELDS)
    #: None: Airflow would read any templated field ending in ".sql" as a file (a table named "x.sql", say).
    #: Keep a statement in a file with ``sql="{% include 'ctas/daily.sql' %}"``.
    template_ext: Sequence[str] = ()
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **SparkJobOperator.template_fields_renderers,
        "sql": "sql",
        "query": "sql",
        "properties": "json",
    }
    ui_color = "#dcefe3"

    def __init__(
        self,
        *,
        sql: str | None = None,
        table: str | None = None,
        query: str | None = None,
        producer: str | None = None,
        format: str | None = None,
        partitioned_by: Sequence[str] | None = None,
        properties: dict[str, str] | None = None,
        location: str | None = None,
        comment: str | None = None,
        if_not_exists: bool = False,
        replace: bool = False,
        atomicity: str | None = None,
        **kwargs: Any,
    ) -> None:
        for callback in ("on_failure_callback", "on_retry_callback"):
            kwargs[callback] = [*_as_list(kwargs.get(callback)), clean_up_after_lost_try]
        super().__init__(**kwargs)
        self.sql = sql
        self.table = table
        self.query = query
        self.producer = producer
        self.format = format
        self.partitioned_by = partitioned_by
        self.properties = properties
        self.location = location
        self.comment = comment
        self.if_not_exists = if_not_exists
        self.replace = replace
        self.atomicity = atomicity

    def build_job(self, context: Any) -> CtasJob:
        given = {name: getattr(self, name) for name in _STATEMENT_FIELDS if getattr(self, name) is not None}
        if self.sql is not None:
            if given:
                raise SpecError(f"give sql or {sorted(given)}, not both: the statement already says them")
            given = parse_ctas(self.sql)
        elif "table" not in given:
            raise SpecError("nothing to create: give sql (CREATE TABLE ... AS SELECT ...) or table with query/producer")
        flags = {"if_not_exists": self.if_not_exists, "replace": self.replace}
        for flag, value in flags.items():
            given[flag] = given.get(flag, False) or value
        if self.format is not None:
            given["format"] = self.format
        if self.atomicity is not None:
            given["atomicity"] = self.atomicity
        sweep = [CtasCleanupJob(table=c.table, owner=c.owner) for c in self._sweepable(context)]
        return CtasJob(**given, owner=TableOwner.of_task_instance(context["ti"]), sweep=sweep)

    def _sweepable(self, context: Any) -> list[ctas_claims.Claim]:
        try:
            claims = ctas_claims.sweepable(context["ti"], self.catalog_conn_id)
        except Exception as err:  # sweeping is a courtesy to other tasks: never the reason this one fails
            self.log.warning("could not look for what lost tries of other tasks left: %s", err)
            return []
        for claim in claims:
            self.log.info(
                "will sweep %s, claimed by %s, whose task is no longer running", claim.table, claim.owner.describe()
            )
        return claims

    def execute(self, context: Any) -> dict[str, Any]:
        owner, output = TableOwner.of_task_instance(context["ti"]), {}
        try:
            output = super().execute(context)
        except BaseException:
            if self._hook is None:  # bad input: nothing was claimed or started
                raise
            result = self._hook.last_result
            output = result.output if result is not None else {}
            if _cleaned_up(result):
                ctas_claims.release_claim(owner)
            else:
                self.log.warning("the job did not report its cleanup: undoing what this try may have left")
                try:
                    _run_cleanup(self, context, ctas_claims.read_claim(owner))
                except Exception as cleanup_error:  # the task fails with the job's error, not the cleanup's
                    self.log.error(
                        "the cleanup job failed too (%s): the claim is kept for this task's retry, the next CTAS "
                        "on this catalog, or the failure callback",
                        cleanup_error,
                    )
            raise
        finally:
            _release_swept(output)
        ctas_claims.release_claim(owner)
        return output

    def hook_for(self, context: Any, job: Any, caches: tuple[CacheUse, ...] = (), purpose: str = "") -> Any:
        hook = super().hook_for(context, job, caches, purpose)
        if isinstance(job, CtasJob):  # last: only a job that will run claims its table
            ctas_claims.write_claim(ctas_claims.Claim(job.table, job.owner, self.catalog_conn_id))
        return hook


def clean_up_after_lost_try(context: Any) -> None:
    """Failure and retry callback: clean up after a try that died before it knew whether it left anything.

    In the task process a try that ended normally has released its claim already, so this does nothing. After
    a try was lost (worker gone, driver killed outright), the DAG processor runs it once Airflow notices, and
    it runs a cleanup job for the claimed table.
    """
    claim = ctas_claims.read_claim(TableOwner.of_task_instance(context["ti"]))
    if claim is None or claim.owner.try_number != context["ti"].try_number:
        return  # released, or a later try's: that try is at work and cleans up after itself
    _run_cleanup(context["task"], context, claim)


def _run_cleanup(operator: SparkJobOperator, context: Any, claim: ctas_claims.Claim | None) -> None:
    """Run the cleanup job for a claim, then release it."""
    if claim is None:
        return
    operator.log.info("cleanup job for %s, after %s", claim.table, claim.owner.describe())
    cleanup = CtasCleanupJob(table=claim.table, owner=claim.owner)
    result = operator.run_hook(operator.hook_for(context, cleanup, purpose="cleanup"))
    operator.log.info("cleanup: %s", "; ".join(result.output.get("undone", [])) or "nothing was left")
    ctas_claims.release_claim(claim.owner)


def _release_swept(output: dict[str, Any]) -> None:
    for swept in output.get("swept", []):
        if swept.get("undone") is not None:
            ctas_claims.release_claim(TableOwner.from_dict(swept["owner"]))


def _cleaned_up(result: JobResult | None) -> bool:
    return result is not None and result.output.get("cleaned_up") is True


def _as_list(callbacks: Any) -> list[Any]:
    if callbacks is None:
        return []
    return list(callbacks) if isinstance(callbacks, list | tuple) else [callbacks]
