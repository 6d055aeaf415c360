"""The extraction job handler and its worker.

Failure mapping:
- Ollama unreachable (connection refused) or the model not pulled:
  ``Postpone``: the job waits without spending an attempt, so an outage never
  dead-letters the backlog; it drains when Ollama is back.
- A timeout, an HTTP 5xx, a malformed or rejected answer: ``Retry`` with
  backoff, dead-lettered after ``max_attempts`` (the episode then shows
  FAILED with the error, and a FAILED event is logged).
"""

from __future__ import annotations

import logging

from nexus_grpc.domain.extraction import Extraction, mark_failed, note_retry
from nexus_grpc.llm import LLMBadOutput, LLMUnavailable
from nexus_grpc.pipeline.signals import JobSignals
from nexus_grpc.pipeline.worker import JobWorker, Outcome, Postpone, Retry, WorkerConfig
from nexus_grpc.store import Database
from nexus_grpc.store import jobs as job_store
from nexus_grpc.store.jobs import Job

log = logging.getLogger(__name__)

# LLMUnavailable covers outages and slow/failing answers alike; these are the
# messages (llm/client.py) that mean "nobody is there to answer".
_UNREACHABLE_MARKERS = ("cannot reach Ollama", "is not available on Ollama", "no Ollama configured")


def is_unreachable(exc: LLMUnavailable) -> bool:
    message = str(exc)
    if any(marker in message for marker in _UNREACHABLE_MARKERS):
        return True
    cause = exc.__cause__
    return isinstance(cause, ConnectionRefusedError)


class ExtractionHandler:
    def __init__(self, extraction: Extraction) -> None:
        self.extraction = extraction

    async def __call__(self, batch: list[Job]) -> list[Outcome]:
        outcomes = []
        for job in batch:
            try:
                write = await self.extraction.run(job.target_id)
            except LLMUnavailable as exc:
                if is_unreachable(exc):
                    outcomes.append(Outcome(job, error=Postpone(str(exc))))
                else:
                    outcomes.append(Outcome(job, error=Retry(str(exc))))
            except LLMBadOutput as exc:
                outcomes.append(Outcome(job, error=Retry(str(exc))))
            else:
                outcomes.append(Outcome(job, write=write))
        return outcomes


class ExtractionWorker(JobWorker):
    """A JobWorker that, once a batch's outcomes are committed, wakes the
    entity indexer and the extraction watchers."""

    def __init__(
        self,
        db: Database,
        signals: JobSignals,
        extraction: Extraction,
        config: WorkerConfig,
        *,
        ready=None,
    ) -> None:
        super().__init__(
            db,
            signals,
            job_store.EXTRACT_EPISODE,
            ExtractionHandler(extraction),
            config,
            on_dead=mark_failed,
            on_retry=note_retry,
            ready=ready,
        )
        self.extraction = extraction

    async def _process(self, batch: list[Job]) -> None:
        try:
            await super()._process(batch)
        finally:
            # Returned: the outcomes are committed (or failed to be, and a
            # spurious wake-up costs watchers one empty read).
            self.extraction.committed()
