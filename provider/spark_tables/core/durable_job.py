"""Durable jobs: a driver that outlives the Airflow task process that started it, and a later try that finds it.

On a cluster master a task try starts its driver detached: in a session of its own, its log in a file beside the
job's result in the shared exchange, and not stopping when the task process disappears. If the task process is lost
without being stopped (its worker killed, its machine gone for Airflow), the driver runs on; the next try finds the
launch in the task state store (``ResumableJobMixin``), learns from the exchange and the cluster whether that
driver still runs, has finished or is gone, and takes its result instead of starting the job again. A user's stop
(marking the task failed, clearing it, ``execution_timeout``) still reaches the driver through its cancel marker.

This module holds what is decided from facts alone; the Airflow side gathers the facts.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

#: Seconds a launched driver has to start its Spark session (and say so) before a later try that cannot see its
#: process takes it for lost: longer than a JVM start and a session start on a busy worker.
START_TIMEOUT_SECONDS = 300.0


class DriverState(enum.StrEnum):
    """What became of a launched driver, as a later try sees it."""

    STARTING = "STARTING"  # launched, its session not started yet
    RUNNING = "RUNNING"  # its application runs on the cluster
    FINISHED = "FINISHED"  # it wrote its result: the job succeeded or failed, the result says which
    LOST = "LOST"  # it ended without a result, or never started: what it did must be undone, the job run again


@dataclass(frozen=True)
class DriverLaunch:
    """A detached driver, as the task state store keeps it: enough for another process to find it.

    ``result_uri`` names the job's files in the exchange (result, spec, log, cancel and started markers); ``host``
    and ``pid`` are the spark-submit process that runs the driver in client mode; ``launched_at`` is when it was
    started, in seconds since the epoch; ``try_number`` the task try that launched it.
    """

    result_uri: str
    host: str
    pid: int
    launched_at: float
    try_number: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> DriverLaunch | None:
        """The launch a task state store value describes; None for a value that is not one (an older format)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                result_uri=str(data["result_uri"]),
                host=str(data["host"]),
                pid=int(data["pid"]),
                launched_at=float(data["launched_at"]),
                try_number=int(data["try_number"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class DriverFacts:
    """What the Airflow side could learn of a launched driver.

    ``application_active`` is the cluster manager's word on the application the driver started (None: no
    application id is known yet, or the cluster manager could not be asked); ``process_alive`` is whether the
    spark-submit process still runs (None: it runs on another machine, so this one cannot tell).
    """

    result_written: bool
    application_id: str | None
    application_active: bool | None
    process_alive: bool | None
    seconds_since_launch: float


def driver_state(facts: DriverFacts, start_timeout: float = START_TIMEOUT_SECONDS) -> DriverState:
    """The state of a launched driver, from what could be learnt of it.

    A result settles it. Then the cluster manager's word on its application, then its process where it can be
    seen. A driver known to neither is given ``start_timeout`` from its launch to start its session.
    """
    if facts.result_written:
        return DriverState.FINISHED
    if facts.application_id is not None and facts.application_active is not None:
        if facts.application_active:
            return DriverState.RUNNING
        return DriverState.LOST if facts.process_alive is not True else DriverState.RUNNING
    if facts.process_alive is not None:
        if not facts.process_alive:
            return DriverState.LOST
        return DriverState.RUNNING if facts.application_id is not None else DriverState.STARTING
    if facts.application_id is not None:  # started, on another machine, and the cluster manager cannot be asked
        return DriverState.RUNNING
    return DriverState.STARTING if facts.seconds_since_launch < start_timeout else DriverState.LOST


#: Seconds a failure or retry callback leaves unused of the time the DAG processor gives it.
CALLBACK_MARGIN_SECONDS = 5.0
#: Seconds the CTAS cleanup job needs in a callback at most: a Spark application's start and its drops (about 20 s on
#: a quiet 2-core machine, 2026-11-28), with room for a busy one.
CLEANUP_JOB_SECONDS = 60.0
#: Seconds a lost try's driver gets at least to stop and undo what it made, before a cleanup job runs beside it.
MIN_STOP_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class CallbackTime:
    """How a failure or retry callback spends the time the DAG processor gives it (``[dag_processor]
    dag_file_processor_timeout``, after which it kills the callback, which then leaves its work half done): waiting for
    a lost try's detached driver to stop (``stop_wait`` seconds), then the CTAS cleanup job, if it fits. Whatever does
    not fit is left to the next CTAS on the catalog, which sweeps the claim."""

    stop_wait: float
    cleanup_fits: bool

    @classmethod
    def within(cls, timeout: float, longest_stop_wait: float) -> CallbackTime:
        budget = max(timeout - CALLBACK_MARGIN_SECONDS, 0.0)
        if budget - CLEANUP_JOB_SECONDS >= MIN_STOP_WAIT_SECONDS:
            return cls(min(longest_stop_wait, budget - CLEANUP_JOB_SECONDS), True)
        return cls(min(longest_stop_wait, budget), False)

    @staticmethod
    def timeout_needed() -> float:
        """The DAG processor's timeout in which both fit."""
        return CALLBACK_MARGIN_SECONDS + MIN_STOP_WAIT_SECONDS + CLEANUP_JOB_SECONDS
