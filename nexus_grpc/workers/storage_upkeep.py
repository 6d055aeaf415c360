"""The storage's own upkeep, beside the job queue: the scrub a delete asked
for, once its delay has passed, and the purge of extraction events past
their retention, at start and every hour.

Neither is a job: neither is work on a row that a client waits for, and
both are idempotent sweeps that a restart simply runs again. What makes the
scrub durable is the due time the delete wrote in its own transaction
(domain/erasure.py, ``scrub_soon``): a crash before the scrub leaves it set,
and the next start finds it due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from nexus_grpc.core.storage import Database
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain import event_retention
from nexus_grpc.workers.eraser import Scrubber

log = logging.getLogger(__name__)

#: How often the upkeep looks at what is due.
INTERVAL = 5.0
#: How often extraction events past their retention are purged.
PURGE_EVERY = 3600.0


class StorageUpkeep:
    def __init__(
        self,
        db: Database,
        scrubber: Scrubber,
        event_retention_seconds: float,
        *,
        interval: float = INTERVAL,
    ) -> None:
        self.db = db
        self.scrubber = scrubber
        self.retention = event_retention_seconds
        self.interval = interval
        self._next_purge = 0.0
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._stopping.clear()
        self._task = asyncio.create_task(self._run(), name="storage upkeep")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.run_due(time.time())
            except Exception:
                log.warning("storage upkeep failed; trying again later", exc_info=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)

    async def run_due(self, at: float) -> None:
        """The scrub, if one is due by ``at``; the event purge, if its hour came."""
        asked = await self.db.read(erasing.scrub_due)
        if asked is not None and asked <= at and await self.scrubber.scrub(asked):
            await self.db.write(lambda c: erasing.scrubbed(c, asked))
        if at >= self._next_purge:
            await self.purge_events(at)
            self._next_purge = at + PURGE_EVERY

    async def purge_events(self, at: float) -> int:
        """Delete every extraction event past its retention at ``at``, a chunk
        a transaction; how many went."""
        removed = 0
        while not self._stopping.is_set():
            chunk = await self.db.write(lambda c: event_retention.purge(c, at, self.retention))
            removed += chunk
            if chunk < event_retention.CHUNK:
                break
        return removed
