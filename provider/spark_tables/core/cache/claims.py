"""Single flight: which task of a DAG run computes a cached table that no copy holds yet, and what the others do.

A consumer that finds no registered copy claims the table's definition for the run: claim 1, created exclusively
on the cache storage, so of two consumers that try at once exactly one creates it. Its holder (a task try)
computes the table and, once its try knows how that went (the copy registered, or the job failed), releases the
claim. The others wait, deferred, until the claim is released, then look the copy up. A claim is current until
the next one exists. If the holder released it without registering a copy (it failed), or its try ended without
releasing it (Airflow found it lost: its task instance is no longer running that try), each waiter tries to create
the next claim, and exactly one does: it takes over, the others wait for it.

That a holder is lost is read from Airflow (its task instance's state, which a waiter asks for every
``cache_wait_check_interval``), not guessed from time. The wait has a bound: past it, a waiter computes the table
itself, as if nothing held it (its copy is then withdrawn if the holder's was registered first). ``claim_step`` and
``wait_step`` decide, given what storage and Airflow say and the time: they do no I/O.
"""

from __future__ import annotations

import datetime
import enum
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from spark_tables.core.ctas.ownership import TableOwner

#: Task instance states in which the try that holds a claim may still be running (or resume after deferring), or
#: its task's next try will take the claim over itself: up for retry, a lost try's durable driver may still compute
#: the table, and the retry takes its result (core/durable_job.py); without one the retry computes it again. Any
#: other (success, failed, upstream_failed, skipped, removed, none: cleared) means it ended without a copy.
LIVE_STATES = frozenset(
    {"running", "deferred", "queued", "scheduled", "up_for_reschedule", "up_for_retry", "restarting"}
)


@dataclass(frozen=True)
class CacheClaim:
    """Claim ``number`` of a cached table's definition in a run: ``holder`` computes it (None: the claim's file
    is being written, so its holder is not known yet); ``released`` once the holder's try is done with it."""

    number: int
    holder: TableOwner | None
    claimed_at: str = ""
    released: bool = False

    def to_json(self) -> str:
        return json.dumps({"holder": asdict(self.holder) if self.holder else None, "claimed_at": self.claimed_at})

    @classmethod
    def from_json(cls, number: int, text: str, released: bool = False) -> CacheClaim:
        """A claim's file as read; an empty one (its holder still writing it) names no holder."""
        if not text.strip():
            return cls(number, None, released=released)
        data: dict[str, Any] = json.loads(text)
        return cls(number, TableOwner.from_dict(data["holder"]), data.get("claimed_at", ""), released)

    def held_by_task_of(self, owner: TableOwner) -> bool:
        """Whether a try of ``owner``'s task (this one or another) holds the claim."""
        return self.holder is not None and _same_task(self.holder, owner)

    def describe(self) -> str:
        return f"claim {self.number} ({self.holder.describe() if self.holder else 'its holder not known yet'})"


class ClaimStep(enum.Enum):
    """What a consumer without a registered copy does next."""

    CLAIM = "claim"  # no claim yet: create claim 1
    HOLD = "hold"  # this try holds the current claim: compute the table
    WAIT = "wait"  # another try holds it and may still be running: wait for it
    TAKE_OVER = "take_over"  # its holder is done without a copy, or lost: create the next claim


def claim_step(current: CacheClaim | None, me: TableOwner, holder_state: Callable[[], str | None]) -> ClaimStep:
    """The next step for try ``me`` that found no registered copy, given the current claim; ``holder_state`` asks
    Airflow for the state of the holder's task instance (None: there is none, or it was cleared), only when the
    claim alone does not tell."""
    if current is None:
        return ClaimStep.CLAIM
    holder = current.holder
    if current.released:
        return ClaimStep.TAKE_OVER
    if holder is None:
        return ClaimStep.WAIT
    if current.held_by_task_of(me):  # this try, or an earlier try of this task, which has ended since this one runs
        return ClaimStep.HOLD if holder.try_number == me.try_number else ClaimStep.TAKE_OVER
    return ClaimStep.WAIT if holder_state() in LIVE_STATES else ClaimStep.TAKE_OVER


class WaitOutcome(enum.Enum):
    """Why a waiting consumer stops waiting (the event its trigger fires)."""

    RELEASED = "released"  # the holder is done: look the copy up, or take over
    CLAIM_CHANGED = "claim_changed"  # another waiter took over, or the run's caches were released: look again
    CHECK_HOLDER = "check_holder"  # time to ask Airflow whether the holder's try still runs
    TIMED_OUT = "timed_out"  # past the bound: compute the table without a claim


def wait_step(
    number: int,
    current: CacheClaim | None,
    now: datetime.datetime,
    check_at: datetime.datetime,
    deadline: datetime.datetime,
) -> WaitOutcome | None:
    """Whether a consumer waiting on claim ``number`` stops now, and why; None: it waits on. ``current`` is the
    claim as storage has it now."""
    if current is None or current.number != number:
        return WaitOutcome.CLAIM_CHANGED
    if current.released:
        return WaitOutcome.RELEASED
    if now >= deadline:
        return WaitOutcome.TIMED_OUT
    if now >= check_at:
        return WaitOutcome.CHECK_HOLDER
    return None


def claim_file_name(cache_folder: str, number: int) -> str:
    """The file of claim ``number`` of a cached table (``cache_folder``: its name and fingerprint)."""
    return f"{cache_folder}.{number:06d}.json"


def released_file_name(cache_folder: str, number: int) -> str:
    """The file that marks claim ``number`` released: written by its holder, beside the claim."""
    return f"{cache_folder}.{number:06d}.released"


def claim_number(cache_folder: str, file_name: str) -> int | None:
    """The number of a claim file of ``cache_folder``'s table; None for another table's or another file."""
    prefix, suffix = f"{cache_folder}.", ".json"
    middle = file_name[len(prefix) : -len(suffix)] if file_name.startswith(prefix) else ""
    return int(middle) if file_name.endswith(suffix) and middle.isdigit() else None


def claimed_cache_folder(file_name: str) -> str | None:
    """The cache folder (``<name>-<fingerprint>``) a claim file is of; None for another file."""
    stem, _, number = file_name.removesuffix(".json").rpartition(".")
    return stem if file_name.endswith(".json") and number.isdigit() and stem else None


def _same_task(one: TableOwner, other: TableOwner) -> bool:
    keys = ("dag_id", "run_id", "task_id", "map_index")
    return all(getattr(one, key) == getattr(other, key) for key in keys)
