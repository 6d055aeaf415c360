"""The ``purge:memory_history`` worker: a deleted memory's history, once its
retention has ended.

DeleteMemory schedules the job for the end of the retention in the same
transaction as the delete, so a purge is never lost to a crash; the purge and
the job row's removal commit together, and purging twice removes nothing more.
"""

from __future__ import annotations

import functools
import time

from nexus_grpc.core.jobs import Job
from nexus_grpc.domain import memory_upkeep
from nexus_grpc.workers.worker import Outcome


async def purge_history(batch: list[Job]) -> list[Outcome]:
    at = time.time()
    return [
        Outcome(
            job,
            write=functools.partial(memory_upkeep.purge_history, memory_id=job.target_id, at=at),
        )
        for job in batch
    ]
