"""How a failed dependency becomes a job outcome, for every worker.

What the failure is worth is the exception's to say (``errors.DependencyError``),
so a worker catches the root and never lists its subclasses:

- ``unreachable`` (the LLM server refused the connection, the model is not
  pulled, none is configured; the embedder or the vector index is away):
  ``Postpone``: the job waits without spending an attempt, so an outage never
  dead-letters the backlog; it drains when the dependency is back.
- not ``retryable`` (``LLMCutOff``: the answer hit its token limit, also on
  the client's retry with more room; ``LLMInputTooLong``): ``GiveUp``,
  dead-lettered now with that reason: the identical request would fail
  identically, at minutes of model time per attempt.
- anything else (a timeout, an HTTP 5xx, a malformed or rejected answer):
  ``Retry`` with backoff, dead-lettered after ``max_attempts``.
"""

from __future__ import annotations

from nexus_grpc.errors import DependencyError
from nexus_grpc.workers.worker import GiveUp, Postpone, Retry


def failure_for(exc: DependencyError, what: str) -> Postpone | Retry:
    if exc.unreachable:
        return Postpone(f"{what}: {exc}")
    if not exc.retryable:
        return GiveUp(f"{what}: {exc}")
    return Retry(f"{what}: {exc}")
