"""The form:memories job handler: an episode's memory candidates become
memory operations (domain/formation.py).

An unreachable LLM waits; a garbled answer or a timeout is retried and at
last dead-lettered, and the episode then shows its formation FAILED with the
reason (workers/dependency_failures.py); a vector index that is down waits too:
deciding without the owner's similar memories could add a duplicate.
"""

from __future__ import annotations

from nexus_grpc.core.jobs import Job
from nexus_grpc.core.repositories import UnitOfWork
from nexus_grpc.domain import formation
from nexus_grpc.domain.formation import MemoryFormationJob
from nexus_grpc.errors import DependencyError, Unavailable
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.worker import Outcome, Postpone


class MemoryFormer:
    def __init__(self, job: MemoryFormationJob) -> None:
        self.job = job

    async def __call__(self, batch: list[Job]) -> list[Outcome]:
        outcomes = []
        for job in batch:
            try:
                write = await self.job.run(job.target_id, job.priority)
            except DependencyError as exc:
                outcomes.append(Outcome(job, error=failure_for(exc, "memory formation failed")))
            except Unavailable as exc:
                outcomes.append(Outcome(job, error=Postpone(f"memory formation waits: {exc}")))
            else:
                outcomes.append(Outcome(job, write=write))
        return outcomes


def mark_failed(uow: UnitOfWork, job: Job, error: str) -> None:
    formation.mark_failed(uow, job.target_id, error)


def note_retry(uow: UnitOfWork, job: Job, error: str) -> None:
    formation.note_retry(uow, job.target_id, error)
