"""The ``expire:memory`` worker: removes a memory once its expire_time passed.

Reads hide an expired memory from the moment it expires (``memory_scope``);
this job makes it gone for good. Creating or updating a memory with an
expire_time schedules the job for that time in the same transaction, so a
crash never leaves an expiry unscheduled. The handler re-reads the row: a
memory whose expiry moved later is rescheduled, one that no longer expires
(or is already gone) is left alone. The removal keeps its last version in the
memory's history (MEMORY_CHANGE_EXPIRE) and deletes its point via the outbox.
"""

from __future__ import annotations

import time

from nexus_grpc.core.storage import Connection
from nexus_grpc.pipeline.worker import Outcome, WriteFn
from nexus_grpc.store import jobs
from nexus_grpc.store import memories as memory_store
from nexus_grpc.store import memory_history as history_store
from nexus_grpc.store.jobs import Job
from nexus_grpc.store.memory_history import ChangedBy

EXPIRED_BY = ChangedBy(request_id="", principal="")


class MemoryExpiry:
    def __init__(self, history_retention: float) -> None:
        self.history_retention = history_retention

    async def handle(self, batch: list[Job]) -> list[Outcome]:
        at = time.time()
        return [Outcome(job, write=self._remove(job.target_id, at)) for job in batch]

    def _remove(self, memory_id: int, at: float) -> WriteFn:
        def write(conn: Connection) -> None:
            memory = memory_store.find(conn, memory_id)
            if memory is None or memory.expire_at is None:
                return
            if memory.expire_at > at:
                jobs.schedule(conn, jobs.EXPIRE_MEMORY, memory_id, memory.expire_at)
                return
            history_store.record_deletion(
                conn, memory, EXPIRED_BY, self.history_retention, history_store.EXPIRE
            )
            memory_store.delete(conn, memory_id)

        return write
