"""The resolve:entity job handler: asks again about an entity kept apart
because the LLM could not say whether it is another one.

An unreachable LLM waits, a garbled answer is retried and finally
dead-lettered (workers/dependency_failures.py); a dead-lettered question leaves the
entity apart and pending, which is the safe state: no merge on a guess.
"""

from __future__ import annotations

from nexus_grpc.core.jobs import Job
from nexus_grpc.domain.entity_resolution import EntityResolution
from nexus_grpc.errors import DependencyError
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.worker import Outcome


class PendingEntityResolver:
    def __init__(self, resolution: EntityResolution) -> None:
        self.resolution = resolution

    async def __call__(self, batch: list[Job]) -> list[Outcome]:
        outcomes = []
        for job in batch:
            try:
                write = await self.resolution.resolve_pending(job.target_id)
            except DependencyError as exc:
                outcomes.append(Outcome(job, error=failure_for(exc, "entity resolution failed")))
            else:
                outcomes.append(Outcome(job, write=write))
        return outcomes
