"""The erasure worker (``erase:run``) and the scrub that takes deleted bytes
off the disk (``Scrubber``, which the storage upkeep also runs after plain
deletes: workers/storage_upkeep.py).

An erasure runs one step a job: the step's rows go in the transaction that
finishes the job, which queues the next step at once (domain/erasure.py), so
``kill -9`` loses at most the step under way, which runs again. Its last
phase waits for the index jobs it queued, has the store and the vector index
scrub their files, and only then makes the receipt final.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time

from nexus_grpc.core import erasure as e
from nexus_grpc.core import jobs
from nexus_grpc.core.jobs import Job
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.core.vectors import VectorIndex
from nexus_grpc.domain import erasure as erasing
from nexus_grpc.domain.vector_collections import ALL as COLLECTIONS
from nexus_grpc.workers.worker import Outcome

log = logging.getLogger(__name__)

#: How soon a disk phase that must wait (index jobs still to run, a reader
#: holding the WAL) looks again.
RECHECK_SECONDS = 1.0


class Scrubber:
    """Takes deleted bytes off the disk: the vector index compacted to the
    rows that exist, then the database's own scrub. One at a time; a scrub
    that started after a caller's deletes were committed covers them."""

    def __init__(self, db: Database, index: VectorIndex) -> None:
        self.db = db
        self.index = index
        self._lock = asyncio.Lock()
        #: When the last scrub that completed started.
        self.covered_until = 0.0

    async def scrub(self, since: float) -> bool:
        """Whether every delete committed by ``since`` has left the files."""
        async with self._lock:
            if self.covered_until >= since:
                return True
            started = time.time()
            for spec in COLLECTIONS:
                live = functools.partial(self._live, spec.table)
                dropped = await self.index.compact(spec.name, live)
                if dropped:
                    log.info("scrub: %d stale points left out of %r", dropped, spec.name)
            if not await self.db.scrub():
                return False
            self.covered_until = started
            return True

    async def _live(self, table: str) -> set[int]:
        return await self.db.read(lambda c: c.documents.all_ids(table))


class Eraser:
    """``erase:run``: one step of an erasure a job."""

    def __init__(self, db: Database, scrubber: Scrubber) -> None:
        self.db = db
        self.scrubber = scrubber

    async def __call__(self, batch: list[Job]) -> list[Outcome]:
        return [await self._one(job) for job in batch]

    async def _one(self, job: Job) -> Outcome:
        erasure = await self.db.read(lambda c: c.erasures.get(job.target_id))
        if erasure is None or erasure.done:
            return Outcome(job)
        if erasure.phase != e.DISK:
            return Outcome(job, write=functools.partial(_step, erasure_id=erasure.id))
        ready = await self.db.read(lambda c: erasing.disk_ready(c, erasure))
        since = float(erasure.carry.get("disk_at", 0.0))
        if not ready or not await self.scrubber.scrub(since):
            return Outcome(job, write=functools.partial(_again, erasure_id=erasure.id))
        return Outcome(job, write=functools.partial(_finish, erasure_id=erasure.id))


def _step(uow: UnitOfWork, erasure_id: int) -> None:
    after = erasing.step(uow, erasure_id, time.time())
    if after is not None and not after.done:
        uow.jobs.enqueue(jobs.ERASE, [erasure_id])


def _again(uow: UnitOfWork, erasure_id: int) -> None:
    uow.jobs.schedule(jobs.ERASE, erasure_id, time.time() + RECHECK_SECONDS, keep_sooner=True)


def _finish(uow: UnitOfWork, erasure_id: int) -> None:
    erasing.finish(uow, erasure_id)


def signals_after_erasure(signals: JobSignals) -> None:
    """Wake what an erasure step's commit queued: the indexers that drop the
    points, the summarizer, and the erasure's own next step."""
    signals.wake(
        jobs.INDEX_EPISODE,
        jobs.INDEX_SUMMARY,
        jobs.INDEX_ENTITY,
        jobs.INDEX_MEMORY,
        jobs.SUMMARIZE_SESSION,
        jobs.ERASE,
    )
