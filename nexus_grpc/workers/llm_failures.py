"""How a failed LLM call becomes a job outcome, for every LLM-backed worker.

- ``LLMUnreachable`` (connection refused, model not pulled, none configured):
  ``Postpone``: the job waits without spending an attempt, so an outage never
  dead-letters the backlog; it drains when the server is back.
- ``LLMCutOff`` (the answer hit its token limit, also on the client's retry
  with more room) and ``LLMInputTooLong``: ``GiveUp``, dead-lettered now with
  that reason: the identical request would fail identically, at minutes of
  model time per attempt.
- Any other ``LLMError`` (a timeout, an HTTP 5xx, a malformed or rejected
  answer): ``Retry`` with backoff, dead-lettered after ``max_attempts``.
"""

from __future__ import annotations

from nexus_grpc.llm import LLMCutOff, LLMError, LLMInputTooLong, LLMUnreachable
from nexus_grpc.workers.worker import GiveUp, Postpone, Retry


def failure_for(exc: LLMError, what: str) -> Postpone | Retry:
    if isinstance(exc, LLMUnreachable):
        return Postpone(f"{what}: {exc}")
    if isinstance(exc, (LLMCutOff, LLMInputTooLong)):
        return GiveUp(f"{what}: {exc}")
    return Retry(f"{what}: {exc}")
