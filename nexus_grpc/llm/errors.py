"""The two ways a call to the local model can fail.

Callers (the extraction queue, summaries, memory selection) only need to know
*whether to retry and how*: Ollama being away is worth waiting for, a garbled
answer is worth a few more tries and then giving up.  Every lower-level error
(httpx, ``ollama.ResponseError``, JSON decoding, pydantic validation) is mapped
to one of these in ``client.py`` so nothing else imports httpx or ollama types.
"""

from __future__ import annotations


class LLMError(Exception):
    """Base class: something went wrong talking to the model."""


class LLMUnavailable(LLMError):
    """Ollama could not answer: connection refused, timeout, HTTP 5xx, or the
    model is not pulled.  Retry with backoff; the service itself is healthy."""


class LLMUnreachable(LLMUnavailable):
    """Nobody is there to answer: Ollama refused the connection, the model is
    not pulled, or no Ollama is configured.  Background jobs wait for it
    without spending attempts; a slow or failing answer is a plain
    ``LLMUnavailable`` and does spend one."""


class LLMBadOutput(LLMError):
    """Ollama answered, but the answer (or the response body) could not be
    used: not JSON, wrong shape, rejected request.  Retry a few times only."""
