"""The ways a call to the local model can fail.

Callers (the extraction queue, summaries, memory selection) only need to know
*whether to retry and how*: the model server being away is worth waiting for,
a garbled answer is worth a few more tries and then giving up, and an answer
that cannot fit (cut off twice, or input that no split makes small enough)
fails at once: repeating the same request fails the same way.  Every
lower-level error (httpx, ``ollama.ResponseError``, JSON decoding, pydantic
validation) is mapped to one of these in the clients so nothing else imports
httpx or ollama types.
"""

from __future__ import annotations

from nexus_grpc.errors import DependencyError


class LLMError(DependencyError):
    """Base class: something went wrong talking to the model."""


class LLMUnavailable(LLMError):
    """The model server could not answer: connection refused, timeout, HTTP
    5xx, or the model is not pulled.  Retry with backoff; the service itself
    is healthy."""


class LLMTimedOut(LLMUnavailable):
    """No answer within the call's deadline: a failed attempt, as any
    ``LLMUnavailable`` is; its own type so the call is accounted as a
    timeout (core/llm_usage.py), not as a server that was away."""


class LLMUnreachable(LLMUnavailable):
    """Nobody is there to answer: the server refused the connection, the model
    is not pulled, or no model server is configured.  Background jobs wait for
    it without spending attempts; a slow or failing answer is a plain
    ``LLMUnavailable`` and does spend one."""

    unreachable = True


class LLMBadOutput(LLMError):
    """The server answered, but the answer (or the response body) could not be
    used: not JSON, wrong shape, rejected request.  Retry a few times only."""


class LLMCutOff(LLMBadOutput):
    """The answer hit its token limit (``done_reason == "length"``) even after
    one retry with more room: a longer or looping answer, not a transient
    fault, so the job fails now with this reason instead of repeating."""

    retryable = False


class LLMInputTooLong(LLMBadOutput):
    """The prompt cannot fit the model's context window with room for the
    answer.  Callers split long input on purpose; this is what is left when
    even one part (one title, one message) is too long."""

    retryable = False
