"""Restores agreement between SQLite and the vector index.

The index is derived, so any difference is repaired the same way: queue an
index job for the id.  A row missing from the index gets embedded; a point
whose row is gone gets deleted (the index job finds no row).  Runs at start
and on demand (ReconcileIndex).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.core.signals import JobSignals
from nexus_grpc.core.storage import Database
from nexus_grpc.domain.vector_collections import ALL, CollectionSpec
from nexus_grpc.vectors import VectorIndex

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileResult:
    requeued: int
    removed_orphans: int


class Reconciler:
    def __init__(self, db: Database, index: VectorIndex, signals: JobSignals) -> None:
        self.db = db
        self.index = index
        self.signals = signals

    async def reconcile(self) -> ReconcileResult:
        requeued = orphans = 0
        for spec in ALL:
            missing, extra = await self._diff(spec)
            if missing or extra:
                ids = sorted(missing | extra)
                await self.db.write(functools.partial(_queue, kind=spec.job_kind, ids=ids))
                self.signals.wake(spec.job_kind)
                log.info(
                    "reconcile %s: %d missing, %d orphaned", spec.name, len(missing), len(extra)
                )
            requeued += len(missing)
            orphans += len(extra)
        return ReconcileResult(requeued, orphans)

    async def _diff(self, spec: CollectionSpec) -> tuple[set[int], set[int]]:
        in_db = await self.db.read(lambda c: c.documents.all_ids(spec.table))
        in_index: set[int] = set()
        async for page in self.index.ids(spec.name):
            in_index.update(page)
        pending = await self.db.read(lambda c: c.jobs.queued_targets(spec.job_kind))
        return (in_db - in_index) - pending, (in_index - in_db) - pending


def _queue(uow: UnitOfWork, kind: str, ids: list[int]) -> None:
    uow.jobs.enqueue(kind, ids)
