"""The ``summarize:session`` worker: the automatic session summary.

CreateEpisode queues the job (in its own transaction) once the session has
about 200 tokens of text and 5 episodes since the last summary.  The handler
runs the same code as the SummarizeSession RPC, which stores the summary
itself (with its INDEX_SUMMARY job) before the job row is deleted: a crash in
between reruns the job, which then finds nothing new and finishes.
"""

from __future__ import annotations

import logging

from nexus_grpc.core.jobs import Job
from nexus_grpc.domain.summaries import NothingToSummarize, Summaries
from nexus_grpc.errors import DependencyError, FailedPrecondition, NotFound
from nexus_grpc.workers.dependency_failures import failure_for
from nexus_grpc.workers.worker import Outcome, Retry

log = logging.getLogger(__name__)


class SessionSummarizer:
    def __init__(self, summaries: Summaries) -> None:
        self.summaries = summaries

    async def handle(self, batch: list[Job]) -> list[Outcome]:
        return [await self._one(job) for job in batch]

    async def _one(self, job: Job) -> Outcome:
        try:
            summary = await self.summaries.run_session_summary(job.target_id)
        except (NothingToSummarize, NotFound):
            return Outcome(job)  # covered already, or the session is gone
        except DependencyError as exc:
            return Outcome(job, error=failure_for(exc, "summary failed"))
        except FailedPrecondition as exc:
            return Outcome(job, error=Retry(f"summary failed: {exc}"))
        log.debug("session %d summarized into summary %d", job.target_id, summary.id)
        return Outcome(job)
