"""The reload trigger of a FULL lookup cache, as Airflow scheduling: a sensor that waits for the next reload time.

The FLIP's CacheReloadTrigger runs inside the Flink job; here the reload is a task of its own, and its trigger is
this sensor, put before it in a DAG that runs again as soon as it ends (``schedule="@continuous"``,
``max_active_runs=1``). The sensor computes when the next reload is due from the table's options and its last
load, then defers: the waiting is done by a trigger in Airflow's triggerer, not by a worker slot.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import AirflowFailException, conf
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue

from spark_tables.core.durations import parse_duration
from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.xcom_keys import RELOAD_DUE
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.tasks.lookup.reload_schedule import DEFAULT_FAILURE_BACKOFF, FailedLoads, LastLoad, next_reload
from spark_tables.utils import settings


class LookupReloadSensor(BaseSensorOperator):
    """Wait until the lookup table's next full-cache reload is due; return that time (ISO) to XCom.

    PERIODIC reloads are due ``lookup.full-cache.periodic-reload.interval`` after the start (FIXED_RATE) or the end
    (FIXED_DELAY) of the last load; TIMED ones at ``lookup.full-cache.timed-reload.iso-time`` every
    ``interval-in-days`` days, in Airflow's ``[core] default_timezone`` when the time has no offset, right across
    daylight-saving changes. A table never loaded is due at once. Pass the returned time to
    ``SparkLookupReloadOperator(scheduled_for=...)`` so the schedule counts from it.

    After failed loads the next one backs off: it waits ``failure_backoff`` after the latest failure, doubled for
    each further failure in a row, never longer than the reload interval (PERIODIC) or past the next reload time
    (TIMED), so a reload DAG run ``@continuous`` does not start load after load while the table cannot be read.

    :param lookup: the ``LookupTable`` (its ``lookup.cache`` must be FULL).
    :param lookup_options: ``lookup.*`` options over the table's own. (templated)
    :param deferrable: wait in the triggerer; False pokes from a worker every ``poke_interval``. Default:
        ``[operators] default_deferrable``, as for Airflow's own deferrable operators.
    :param failure_backoff: the wait after a first failed load, a duration (``"1 min"``, ``"30 s"``) or a
        timedelta. Default 1 minute.

    Deferred or poking, the sensor fails after ``timeout`` seconds (the sensors' default: 7 days) if the reload is
    not due by then.
    """

    template_fields: Sequence[str] = ("lookup_options",)
    ui_color = "#fdf2d0"

    def __init__(
        self,
        *,
        lookup: LookupTable,
        lookup_options: Mapping[str, Any] | None = None,
        deferrable: bool | None = None,
        failure_backoff: str | datetime.timedelta = DEFAULT_FAILURE_BACKOFF,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(lookup, LookupTable):
            raise TypeError(f"lookup must be a LookupTable declaration, not {type(lookup).__name__}")
        self.lookup = lookup
        self.lookup_options = dict(lookup_options or {})
        self.failure_backoff = parse_duration(failure_backoff, "failure_backoff")
        if not self.failure_backoff:
            raise SpecError("failure_backoff is zero: give a positive duration such as 1 min")
        if deferrable is None:  # read when the DAG is parsed, as Airflow's deferrable operators read it
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.deferrable = deferrable

    def due(self, context: Context) -> pendulum.DateTime:
        """When the next reload is due, from the last load published and the loads failing since; also left in
        XCom (``RELOAD_DUE``) for the monitoring overview, since a deferred sensor has returned nothing yet."""
        try:
            hook = LookupTableHook(self.lookup.with_options(self.lookup_options))
            pointer = hook.pointer()
            failing = pointer.failing
            due = next_reload(
                hook.lookup.lookup_options,
                LastLoad.of(pointer.current) if pointer.current is not None else None,
                now=pendulum.now("UTC"),
                timezone=settings.default_timezone(),
                failing=FailedLoads.of(failing) if failing is not None else None,
                failure_backoff=self.failure_backoff,
            )
        except SpecError as err:
            raise AirflowFailException(str(err)) from None
        if failing is not None:
            self.log.warning(
                "lookup table %s: %d load(s) failed in a row, the latest ending at %s (%s); backing off: the next "
                "attempt is due at %s",
                self.lookup.name,
                failing.count,
                failing.finished,
                failing.error,
                due.isoformat(),
            )
        context["ti"].xcom_push(
            key=RELOAD_DUE,
            value={"lookup": self.lookup.name, "due": due.isoformat(), "failing": failing.count if failing else 0},
        )
        return due

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        due = self.due(context)
        if due <= pendulum.now("UTC"):
            self.log.info("the reload of lookup table %s is due now (%s)", self.lookup.name, due.isoformat())
            return due.isoformat()
        self.log.info("the next reload of lookup table %s is due at %s: deferring", self.lookup.name, due.isoformat())
        self.defer(trigger=DateTimeTrigger(moment=due), method_name="execute_complete", timeout=self.timeout)

    def execute_complete(self, context: Context, event: Any = None) -> str:
        """The trigger fired: the reload is due. The due time is computed again from the same last load."""
        due = self.due(context).isoformat()
        self.log.info("the reload of lookup table %s is due (%s)", self.lookup.name, due)
        return due

    def poke(self, context: Context) -> PokeReturnValue:
        due = self.due(context)
        return PokeReturnValue(is_done=due <= pendulum.now("UTC"), xcom_value=due.isoformat())
