"""The ``purge:memory_history`` worker: a deleted memory's history, once its
retention has ended.

DeleteMemory schedules the job for the end of the retention in the same
transaction as the delete, so a purge is never lost to a crash; the purge and
the job row's removal commit together, and purging twice removes nothing more.
"""

from __future__ import annotations

import time

from nexus_grpc.core.storage import Connection
from nexus_grpc.pipeline.worker import Outcome
from nexus_grpc.store import memory_history as history_store
from nexus_grpc.store.jobs import Job


async def purge_history(batch: list[Job]) -> list[Outcome]:
    at = time.time()

    def purge(memory_id: int):  # type: ignore[no-untyped-def]
        def write(conn: Connection) -> None:
            history_store.purge(conn, [memory_id], at)

        return write

    return [Outcome(job, write=purge(job.target_id)) for job in batch]
