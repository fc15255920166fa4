"""Claims: a note, per task whose job makes CTAS tables, of the tables its tries may leave unfinished, kept until that
is known not to be so.

A task writes its claim before its job starts and releases it when the job reports that it finished or undid
what it created. A claim that outlives its try means the try died without knowing (its process and driver
killed outright, its machine gone). Two things find such claims: the task's failure and retry callbacks (run by
the DAG processor when Airflow notices a lost worker), and every later task on the same catalog whose job makes
CTAS tables (a CTAS, or a SQL job with CTAS statements): its job first undoes what the claimed tries of tasks
that are no longer running left (``sweepable``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from airflow.sdk import ObjectStoragePath
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from spark_tables.core.ctas.ownership import TableOwner
from spark_tables.core.exchange import claim_uri, result_uri
from spark_tables.hooks.job_exchange import forget_launched_files
from spark_tables.hooks.object_storage import storage_path
from spark_tables.tasks.states import FINISHED_STATES, task_state
from spark_tables.utils import settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """``durable``: the job's driver outlives a lost task process, and the task's next try takes it over."""

    tables: tuple[str, ...]
    owner: TableOwner
    catalog_conn_id: str
    durable: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "tables": list(self.tables),
                "owner": asdict(self.owner),
                "catalog_conn_id": self.catalog_conn_id,
                "durable": self.durable,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Claim:
        data = json.loads(text)
        return cls(
            tuple(data["tables"]),
            TableOwner.from_dict(data["owner"]),
            data["catalog_conn_id"],
            data.get("durable") is True,
        )


def _task(owner: TableOwner) -> dict[str, Any]:
    return {"dag_id": owner.dag_id, "run_id": owner.run_id, "task_id": owner.task_id, "map_index": owner.map_index}


def _path(owner: TableOwner) -> ObjectStoragePath:
    return storage_path(claim_uri(settings.exchange_uri(), **_task(owner)))


def write_claim(claim: Claim) -> None:
    path = _path(claim.owner)
    path.parent.mkdir(parents=True, exist_ok=True)  # the exchange root, on its first use
    path.write_text(claim.to_json())


def read_claim(owner: TableOwner) -> Claim | None:
    path = _path(owner)
    return Claim.from_json(path.read_text()) if path.exists() else None


def release_claim(owner: TableOwner) -> None:
    """Forget the claim, and what its try may have left in the exchange: results, cancel markers, and a durable
    job's spec, started note and log."""
    for purpose in ("", "cleanup"):
        forget_launched_files(
            result_uri(settings.exchange_uri(), **_task(owner), try_number=owner.try_number, purpose=purpose)
        )
    _path(owner).unlink(missing_ok=True)


def sweepable(ti: RuntimeTaskInstanceProtocol, catalog_conn_id: str) -> list[Claim]:
    """Claims on this catalog by other tasks that have finished: what their lost tries may have left.

    A task without a state (its run deleted, or cleared and not yet queued) is left alone: it may run again.
    """
    root = storage_path(settings.exchange_uri())
    if not root.exists():
        return []
    found = []
    for path in root.glob("*.claim.json"):
        try:
            claim = Claim.from_json(path.read_text())
        except (OSError, ValueError, KeyError, TypeError) as err:  # released meanwhile, or not ours to read
            log.warning("skipping claim %s: %s", path, err)
            continue
        same_task = _task(claim.owner) == {key: getattr(ti, key) for key in _task(claim.owner)}
        if same_task or claim.catalog_conn_id != catalog_conn_id:
            continue
        if task_state(ti.get_task_states, claim.owner) in FINISHED_STATES:
            found.append(claim)
    return found
