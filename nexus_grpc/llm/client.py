"""Thin async wrapper around ``ollama.AsyncClient``.

Why a wrapper: the ollama client leaks several unrelated exception types
(``httpx.ConnectError`` on streams but builtin ``ConnectionError`` otherwise,
``httpx.ReadTimeout``, ``ollama.ResponseError``, ``json.JSONDecodeError``,
``pydantic.ValidationError``) and has no per-request timeout.  Everything here
is mapped to ``LLMUnavailable`` / ``LLMBadOutput`` and every call honours the
caller's remaining deadline.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import httpx
import ollama
import pydantic

from nexus_grpc import deadlines
from nexus_grpc.llm.errors import LLMBadOutput, LLMError, LLMUnavailable, LLMUnreachable
from nexus_grpc.llm.text import strip_model_tokens

Message = Mapping[str, Any]

_FENCE = re.compile(r"\A```[a-zA-Z]*\s*\n?(.*?)\n?```\s*\Z", re.S)
_END = object()  # end-of-stream marker between the producer task and the consumer


class LLMClient:
    """One shared client per process (it pools HTTP connections).

    ``timeout`` is the httpx timeout (connect, and each read: for a stream that
    is the longest silence between chunks) and the default overall deadline of
    non-streaming calls.  A per-call ``timeout`` is the caller's remaining
    deadline for the whole call, stream included.
    """

    def __init__(self, host: str, *, timeout: float) -> None:
        self._host = host
        self._timeout = timeout
        self._client = ollama.AsyncClient(host=host, timeout=timeout)

    @property
    def host(self) -> str:
        return self._host

    async def close(self) -> None:
        await self._client.close()

    async def chat_json(
        self,
        model: str,
        messages: Sequence[Message],
        schema: Mapping[str, Any],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> dict[str, Any]:
        """Non-streaming chat constrained by a JSON schema; returns the parsed object."""
        text = await self.chat_text(
            model,
            messages,
            temperature=temperature,
            num_predict=num_predict,
            timeout=timeout,
            schema=schema,
        )
        return parse_json_object(text, model=model)

    async def chat_text(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
        schema: Mapping[str, Any] | None = None,
    ) -> str:
        """Non-streaming chat; returns the answer with think/ChatML tokens stripped."""
        limit = self._deadline(timeout, model)
        call = self._client.chat(
            model=model,
            messages=list(messages),
            stream=False,
            format=dict(schema) if schema is not None else None,
            options={"temperature": temperature, "num_predict": num_predict},
        )
        try:
            response = await asyncio.wait_for(call, limit)
        except Exception as exc:
            raise self._map_error(exc, model, limit) from exc
        return strip_model_tokens(response.message.content or "")

    async def chat_stream(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        temperature: float,
        num_predict: int,
        timeout: float | None = None,  # noqa: ASYNC109 - the caller's remaining deadline
    ) -> AsyncGenerator[str, None]:
        """Yield content deltas as the model produces them (raw: wrap with
        ``text.clean_stream`` to drop think/ChatML tokens).

        The HTTP stream is read by one producer task feeding a small queue, so
        the deadline can be enforced with ``wait_for`` on the queue without ever
        cancelling httpx mid-read from a different task than the one that opened
        the stream.  Closing the generator early cancels the producer.
        """
        # No overall cap by default: a long overview may legitimately stream for
        # minutes; httpx's read timeout still bounds each silence.
        if timeout is None:
            timeout = deadlines.remaining()  # the RPC's, when streaming to a caller
        limit = self._deadline(timeout, model, cap=False) if timeout is not None else None
        loop = asyncio.get_running_loop()
        deadline = None if limit is None else loop.time() + limit
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=64)

        async def produce() -> None:
            try:
                parts = await self._client.chat(
                    model=model,
                    messages=list(messages),
                    stream=True,
                    options={"temperature": temperature, "num_predict": num_predict},
                )
                async for part in parts:
                    if part.message.content:
                        await queue.put(part.message.content)
                await queue.put(_END)
            except Exception as exc:
                await queue.put(self._map_error(exc, model, limit))

        producer = asyncio.create_task(produce())
        try:
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise self._timed_out(model, limit)
                try:
                    item = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    raise self._timed_out(model, limit) from None
                if item is _END:
                    return
                if isinstance(item, LLMError):
                    raise item
                assert isinstance(item, str)
                yield item
        finally:
            producer.cancel()
            # asyncio.wait never raises the task's outcome, and does not swallow
            # a cancellation of *this* task.
            await asyncio.wait({producer})

    async def list_models(
        self,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - remaining deadline
    ) -> list[str]:
        """Names of the pulled models (health checks, ``doctor``)."""
        limit = self._deadline(timeout, None)
        try:
            response = await asyncio.wait_for(self._client.list(), limit)
        except Exception as exc:
            raise self._map_error(exc, None, limit) from exc
        return [m.model for m in response.models if m.model]

    # -- helpers ---------------------------------------------------------------

    def _deadline(self, timeout: float | None, model: str | None, *, cap: bool = True) -> float:
        """Overall limit for a call: the caller's remaining deadline, capped by ours.

        Without an explicit ``timeout``, the deadline of the RPC being served
        (if any) is the caller's: an answer after it would reach nobody.
        """
        if timeout is None:
            timeout = deadlines.remaining()
        if timeout is None:
            limit = self._timeout
        else:
            limit = min(timeout, self._timeout) if cap else timeout
        if limit <= 0:
            raise LLMUnavailable(
                f"deadline already expired before calling Ollama{_for(model)} at {self._host}"
            )
        return limit

    def _timed_out(self, model: str | None, limit: float | None) -> LLMUnavailable:
        took = f" within {limit:.1f}s" if limit is not None else ""
        return LLMUnavailable(f"Ollama{_for(model)} at {self._host} did not answer{took}")

    def _map_error(self, exc: Exception, model: str | None, limit: float | None) -> LLMError:
        """Translate whatever the ollama/httpx stack raised into our two errors."""
        if isinstance(exc, LLMError):
            return exc
        if isinstance(exc, ollama.ResponseError):
            code = exc.status_code
            if code == 404:
                return LLMUnreachable(
                    f"model {model!r} is not available on Ollama at {self._host} "
                    f"({exc.error}); pull it with `ollama pull {model}`"
                )
            # -1: an {"error": ...} line in the middle of a 200 stream (the
            # runner crashed or ran out of memory): a server-side failure.
            if code >= 500 or code in (-1, 408, 429):
                return LLMUnavailable(
                    f"Ollama{_for(model)} at {self._host} failed (HTTP {code}): {exc.error}"
                )
            # Other 4xx: Ollama refused our request (bad schema, unsupported
            # option).  Not an outage, so it must not be retried forever.
            return LLMBadOutput(
                f"Ollama{_for(model)} at {self._host} rejected the request "
                f"(HTTP {code}): {exc.error}"
            )
        # Only a failed connection means nobody is there (worth waiting for
        # without spending attempts).  A connect timeout is a host that is off
        # or firewalled; a read error mid-answer is a failed attempt.
        if isinstance(exc, (ConnectionError, httpx.ConnectError, httpx.ConnectTimeout)):
            reason = str(exc) or type(exc).__name__
            return LLMUnreachable(f"cannot reach Ollama at {self._host}: {reason}")
        # TimeoutError covers asyncio.wait_for; httpx timeouts are checked before
        # the generic transport errors they subclass.
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            return self._timed_out(model, limit)
        if isinstance(exc, httpx.TransportError):
            reason = str(exc) or type(exc).__name__
            return LLMUnavailable(f"connection to Ollama at {self._host} failed: {reason}")
        if isinstance(exc, (json.JSONDecodeError, pydantic.ValidationError, httpx.DecodingError)):
            return LLMBadOutput(
                f"Ollama{_for(model)} at {self._host} sent a malformed response body: "
                f"{type(exc).__name__}: {exc}"
            )
        if isinstance(exc, (httpx.HTTPError, OSError)):
            return LLMUnavailable(f"error talking to Ollama at {self._host}: {exc!r}")
        return LLMBadOutput(f"unexpected error from Ollama{_for(model)}: {exc!r}")


def parse_json_object(text: str, *, model: str | None = None) -> dict[str, Any]:
    """Parse a model answer that must be one JSON object (after token stripping).

    Structured output makes fences unlikely, but a stray ```json fence costs
    nothing to tolerate.
    """
    cleaned = strip_model_tokens(text)
    fenced = _FENCE.match(cleaned)
    if fenced:
        cleaned = fenced.group(1).strip()
    try:
        value = json.loads(cleaned)
    except json.JSONDecodeError as exc:
        snippet = cleaned[:200] + ("..." if len(cleaned) > 200 else "")
        raise LLMBadOutput(
            f"model{_for(model)} did not answer JSON ({exc.msg}): {snippet!r}"
        ) from exc
    if not isinstance(value, dict):
        raise LLMBadOutput(
            f"model{_for(model)} answered JSON {type(value).__name__}, expected an object"
        )
    return value


def _for(model: str | None) -> str:
    return f" ({model})" if model else ""
