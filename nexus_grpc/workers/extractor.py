"""The extraction job handler.

Failures map to outcomes through ``workers/dependency_failures.py``: an
unreachable Ollama waits, a slow or garbled answer is retried and finally
dead-lettered (the episode then shows FAILED with the error, and a FAILED
event is logged).
"""

from __future__ import annotations

from nexus_grpc.core.jobs import Job
from nexus_grpc.domain.extraction import Extraction
from nexus_grpc.errors import DependencyError
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.worker import Outcome


class ExtractionHandler:
    def __init__(self, extraction: Extraction) -> None:
        self.extraction = extraction

    async def __call__(self, batch: list[Job]) -> list[Outcome]:
        outcomes = []
        for job in batch:
            try:
                write = await self.extraction.run(job.target_id, job.priority)
            except DependencyError as exc:
                outcomes.append(Outcome(job, error=failure_for(exc, "extraction failed")))
            else:
                outcomes.append(Outcome(job, write=write))
        return outcomes
