"""The reload trigger of a FULL lookup cache, as Airflow scheduling: a sensor that waits for the next reload time.

The FLIP's CacheReloadTrigger runs inside the Flink job; here the reload is a task of its own, and its trigger is
this sensor, put before it in a DAG that runs again as soon as it ends (``schedule="@continuous"``,
``max_active_runs=1``). The sensor computes when the next reload is due from the table's options and its last
load, then defers: the waiting is done by a trigger in Airflow's triggerer, not by a worker slot. A table with
versions (a Delta table of the catalog) is reloaded only when its version is no longer the one its snapshot holds:
at each reload time, or (``ON_CHANGE``) as soon as its log shows a new commit.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pendulum
from airflow.providers.common.compat.sdk import AirflowFailException, conf
from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.triggers.base import BaseTrigger

from spark_tables.core.durations import parse_duration
from spark_tables.core.errors import SpecError
from spark_tables.core.lookup.options import ReloadStrategy
from spark_tables.core.lookup.snapshot import Pointer
from spark_tables.core.lookup.table import LookupTable
from spark_tables.core.xcom_keys import RELOAD_DUE
from spark_tables.hooks.lookup.tables import LookupTableHook
from spark_tables.tasks.lookup.reload_schedule import (
    DEFAULT_FAILURE_BACKOFF,
    FailedLoads,
    LastLoad,
    next_check,
    next_reload,
)
from spark_tables.triggers.table_version import TableVersionTrigger
from spark_tables.utils import settings


class LookupReloadSensor(BaseSensorOperator):
    """Wait until the lookup table's next full-cache reload is due; return that time (ISO) to XCom.

    PERIODIC reloads are due ``lookup.full-cache.periodic-reload.interval`` after the start (FIXED_RATE) or the end
    (FIXED_DELAY) of the last load; TIMED ones at ``lookup.full-cache.timed-reload.iso-time`` every
    ``interval-in-days`` days, in Airflow's ``[core] default_timezone`` when the time has no offset, right across
    daylight-saving changes; ON_CHANGE ones when the table's version changes. A table never loaded is due at once.
    Pass the returned time to ``SparkLookupReloadOperator(scheduled_for=...)`` so the schedule counts from it.

    For a table with versions, the sensor reads the version from the table's log at each reload time (a listing and
    one small file, no Spark): while it is the one the snapshot holds, nothing is due, and the sensor waits for the
    next reload time; ON_CHANGE, it waits for a new version, looking every ``poke_interval`` seconds (deferred, in
    the triggerer).

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
        #: Poking: the last reload time that found the table unchanged, this try.
        self._checked: str | None = None

    def due(self, hook: LookupTableHook, pointer: Pointer, checked: str | None) -> pendulum.DateTime:
        """When the next reload is due, from the last load published and the loads failing since, and not before the
        reload time after ``checked`` (a reload time that found the table unchanged)."""
        failing, options, timezone = pointer.failing, hook.lookup.lookup_options, settings.default_timezone()
        due = next_reload(
            options,
            LastLoad.of(pointer.current) if pointer.current is not None else None,
            now=pendulum.now("UTC"),
            timezone=timezone,
            failing=FailedLoads.of(failing) if failing is not None else None,
            failure_backoff=self.failure_backoff,
        )
        if checked is not None:
            due = max(due, next_check(options, pendulum.parse(checked), timezone=timezone))
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
        return due

    def reload_or_wait(self, context: Context, checked: str | None = None) -> Decision:
        """Whether the table is to reload now, or what to wait for; left in XCom (``RELOAD_DUE``) for the monitoring
        overview, since a deferred sensor has returned nothing yet.

        A table with versions reloads at a due time only if its version is no longer the one its snapshot holds,
        read from its log (``LookupTableHook.version_now``): unchanged, the sensor waits for the next reload time
        (PERIODIC, TIMED) or for the version to change (ON_CHANGE, looking every ``poke_interval``)."""
        try:
            hook = LookupTableHook(self.lookup.with_options(self.lookup_options))
            pointer = hook.pointer()
            decision = self._decide(hook, pointer, checked)
        except SpecError as err:
            raise AirflowFailException(str(err)) from None
        held = pointer.current.table_version if pointer.current is not None else None
        context["ti"].xcom_push(
            key=RELOAD_DUE,
            value={
                "lookup": self.lookup.name,
                "due": decision.due.isoformat() if decision.due is not None else None,
                "failing": pointer.failing.count if pointer.failing else 0,
                "table_version": held.number if held is not None else None,
            },
        )
        return decision

    def _decide(self, hook: LookupTableHook, pointer: Pointer, checked: str | None) -> Decision:
        options = hook.lookup.lookup_options
        due = self.due(hook, pointer, checked)
        if due > pendulum.now("UTC"):
            return Decision(due, DateTimeTrigger(moment=due), {"checked": checked})
        snapshot = pointer.current
        on_change = options.reload_strategy is ReloadStrategy.ON_CHANGE
        if snapshot is None or (snapshot.table_version is None and not on_change):
            return Decision(due)  # a first load, or a table without versions: the schedule alone decides
        now, held = hook.version_now(snapshot), snapshot.table_version
        if now != held:
            self.log.info(
                "lookup table %s: the table is at %s, its snapshot %s holds version %d: the reload is due",
                self.lookup.name,
                now.describe() if now is not None else "no version (gone)",
                snapshot.version,
                held.number,
            )
            return Decision(max(due, pendulum.now("UTC")) if on_change else due)
        if on_change:
            self.log.info(
                "lookup table %s: %s is the one its snapshot %s holds: waiting for it to change (looking every %s s)",
                self.lookup.name,
                held.describe(),
                snapshot.version,
                self.poke_interval,
            )
            return Decision(None, TableVersionTrigger(held=held.to_dict(), poll_seconds=float(self.poke_interval)))
        after = next_check(options, due, timezone=settings.default_timezone())
        self.log.info(
            "lookup table %s: %s is unchanged at its reload time %s (snapshot %s): the next reload time is %s",
            self.lookup.name,
            held.describe(),
            due.isoformat(),
            snapshot.version,
            after.isoformat(),
        )
        return Decision(after, DateTimeTrigger(moment=after), {"checked": due.isoformat()})

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        return self.execute_complete(context)

    def execute_complete(self, context: Context, event: Any = None, checked: str | None = None) -> str:
        """Due now: the due time; else defer again (a trigger fired: a time came, or the table's version changed)."""
        decision = self.reload_or_wait(context, checked)
        if decision.trigger is None:
            self.log.info("the reload of lookup table %s is due (%s)", self.lookup.name, decision.due.isoformat())
            return decision.due.isoformat()
        awaited = decision.due.isoformat() if decision.due is not None else "the table's version changes"
        self.log.info("lookup table %s: deferring until %s", self.lookup.name, awaited)
        self.defer(
            trigger=decision.trigger, method_name="execute_complete", kwargs=decision.resume, timeout=self.timeout
        )

    def poke(self, context: Context) -> PokeReturnValue:
        decision = self.reload_or_wait(context, self._checked)
        if decision.trigger is None:
            return PokeReturnValue(is_done=True, xcom_value=decision.due.isoformat())
        self._checked = decision.resume.get("checked", self._checked)
        return PokeReturnValue(is_done=False, xcom_value=decision.due.isoformat() if decision.due else None)


@dataclass(frozen=True)
class Decision:
    """What the sensor found: the reload due now at ``due`` (no ``trigger``), or the ``trigger`` to wait for, the
    time it fires (None: when the table's version changes) and the arguments to resume with."""

    due: pendulum.DateTime | None
    trigger: BaseTrigger | None = None
    resume: dict[str, Any] = field(default_factory=dict)
