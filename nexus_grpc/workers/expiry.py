"""The ``expire:memory`` worker: removes each memory whose expire_time
passed (``domain.memory_upkeep.expire`` says what that means), in the
transaction that finishes its job."""

from __future__ import annotations

import functools
import time

from nexus_grpc.core.jobs import Job
from nexus_grpc.domain import memory_upkeep
from nexus_grpc.workers.worker import Outcome


class MemoryExpiry:
    def __init__(self, history_retention: float) -> None:
        self.history_retention = history_retention

    async def handle(self, batch: list[Job]) -> list[Outcome]:
        at = time.time()
        return [
            Outcome(
                job,
                write=functools.partial(
                    memory_upkeep.expire,
                    memory_id=job.target_id,
                    at=at,
                    history_retention=self.history_retention,
                ),
            )
            for job in batch
        ]
