"""How a failed LLM call becomes a job outcome, for every LLM-backed worker.

- ``LLMUnreachable`` (connection refused, model not pulled, none configured):
  ``Postpone``: the job waits without spending an attempt, so an outage never
  dead-letters the backlog; it drains when Ollama is back.
- Any other ``LLMError`` (a timeout, an HTTP 5xx, a malformed or rejected
  answer): ``Retry`` with backoff, dead-lettered after ``max_attempts``.
"""

from __future__ import annotations

from nexus_grpc.llm import LLMError, LLMUnreachable
from nexus_grpc.pipeline.worker import Postpone, Retry


def failure_for(exc: LLMError, what: str) -> Postpone | Retry:
    if isinstance(exc, LLMUnreachable):
        return Postpone(f"{what}: {exc}")
    return Retry(f"{what}: {exc}")
