"""The wait for a table's version to change, in Airflow's triggerer: a look at the table's log every poll, no Spark
and no read of its rows (``hooks/table_versions.py``), so that a sensor of a lookup table reloaded ``ON_CHANGE``
holds no worker slot while the table stays as its snapshot copied it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from spark_tables.core.table_format.version import TableVersion
from spark_tables.hooks.table_versions import current_version


class TableVersionTrigger(BaseTrigger):
    """Fires once the table of ``held`` (a ``TableVersion``'s fields) is at another version, looking every
    ``poll_seconds``: its event's ``version`` is the new one's fields, None when the table is gone."""

    def __init__(self, *, held: dict[str, Any], poll_seconds: float) -> None:
        super().__init__()
        self.held = TableVersion.from_dict(held, "table version trigger")
        self.poll_seconds = poll_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"held": self.held.to_dict(), "poll_seconds": self.poll_seconds},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            await asyncio.sleep(self.poll_seconds)
            now = await asyncio.to_thread(current_version, self.held)
            if now != self.held:
                self.log.info("%s is now %s", self.held.describe(), now.describe() if now else "gone")
                yield TriggerEvent({"version": now.to_dict() if now is not None else None})
                return
